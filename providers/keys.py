"""The one provider -> API-key map, and the fail-loud check run before a run starts.

Each entry of ``KEY_ENV[provider]`` is an alternative; an entry "A+B" needs both variables
(AWS Bedrock: access key id and secret, or a named profile). The variable names are the ones
litellm itself reads, so setting the variable we name is all a user has to do. Local servers
(Ollama, LM Studio, vLLM, llama.cpp behind ``openai/<name>`` with a base URL) need no key.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

from providers.base import LLMError, env_is_set, provider_of

KEY_ENV: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "azure": ("AZURE_API_KEY", "AZURE_OPENAI_API_KEY"),
    "xai": ("XAI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "dashscope": ("DASHSCOPE_API_KEY",),  # Qwen (international and China endpoints)
    "zai": ("ZAI_API_KEY",),  # Zhipu GLM
    "minimax": ("MINIMAX_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "bedrock": ("AWS_ACCESS_KEY_ID+AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"),
}

#: Providers that run on the user's machine or network and take no key.
LOCAL_PROVIDERS: frozenset[str] = frozenset({
    "offline", "ollama", "ollama_chat", "lm_studio", "hosted_vllm", "vllm", "llamafile",
    "openai_like", "xinference", "lemonade", "docker_model_runner",
})

#: Placeholder handed to OpenAI-compatible local servers, whose SDK insists on some key.
LOCAL_PLACEHOLDER_KEY = "no-key-needed"


class MissingKeyError(LLMError):
    """A hosted model was chosen but its key variable is not set (kind "config")."""

    def __init__(self, message: str, kind: str = "config", attempts=None, status=None) -> None:
        super().__init__(message, "config", attempts, status)


def needs_key(provider: str, base_url: str | None = None) -> bool:
    """Whether ``provider`` needs a key: hosted providers do, local ones and any
    OpenAI-compatible endpoint given by base URL do not (a key is used when present)."""
    if provider in LOCAL_PROVIDERS:
        return False
    if provider == "openai" and base_url:
        return False
    return provider in KEY_ENV


def _alternative_is_set(alternative: str) -> bool:
    return all(env_is_set(name) for name in alternative.split("+"))


def describe(provider: str) -> str:
    """Human text for the variables of ``provider``: "OPENAI_API_KEY", "A and B, or C"."""
    return ", or ".join(" and ".join(alt.split("+")) for alt in KEY_ENV.get(provider, ()))


def key_present(provider: str) -> bool:
    return any(_alternative_is_set(alt) for alt in KEY_ENV.get(provider, ()))


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
    from providers.catalog import model_warning

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


def secret_values() -> list[str]:
    """Current values of every key variable we know (for redaction); longest first."""
    names = {n for alts in KEY_ENV.values() for alt in alts for n in alt.split("+")}
    names.discard("AWS_PROFILE")  # a profile name is not a secret
    values = [os.environ[n].strip() for n in names if len(os.environ.get(n, "").strip()) >= 6]
    return sorted(set(values), key=len, reverse=True)
