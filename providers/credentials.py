"""The fail-loud key check run before a run starts: a hosted model whose key variable is
unset stops the command with the exact variable to set (``MissingKeyError``)."""
from __future__ import annotations

from collections.abc import Iterable

from providers.base import LLMError
from providers.catalog import model_warning
from providers.keys import KEY_ENV, LOCAL_PROVIDERS, describe, key_present, needs_key, provider_of

__all__ = ["MissingKeyError", "require_key", "check_keys"]


class MissingKeyError(LLMError):
    """A hosted model was chosen but its key variable is not set (kind "config")."""

    def __init__(self, message: str, kind: str = "config", attempts=None, status=None) -> None:
        super().__init__(message, "config", attempts, status)


def require_key(model: str, base_url: str | None = None) -> None:
    """MissingKeyError naming the exact variable when ``model`` needs a key that is unset."""
    provider = provider_of(model)
    if needs_key(provider, base_url) and not key_present(provider):
        raise MissingKeyError(
            f"model {model} needs {describe(provider)} in the environment "
            f"(export {KEY_ENV[provider][0].split('+')[0]}=...), or choose an offline/ or "
            "local model")


def check_keys(models: Iterable[str], base_url: str | None = None) -> list[str]:
    """Fail loudly before a run: MissingKeyError for the first model whose key is unset.

    Returns warnings that should not stop a run: a model the catalog does not know for a
    known provider, a provider we have no key entry for, a malformed model id.
    """
    warnings: list[str] = []
    for model in dict.fromkeys(models):  # unique, in order
        provider = provider_of(model)
        if not provider:
            raise MissingKeyError(f"model {model!r} must be written provider/model, "
                                  "e.g. openai/gpt-4.1-mini or offline/quick")
        require_key(model, base_url)
        if provider not in KEY_ENV and provider not in LOCAL_PROVIDERS:
            warnings.append(f"provider {provider!r} (model {model}) has no entry in the key "
                            "map; make sure the credentials litellm needs for it are set")
        warning = model_warning(model, base_url)
        if warning:
            warnings.append(warning)
    return warnings
