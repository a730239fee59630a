"""Known models per provider: the source for CLI choices and for model-name validation.

Validation is advisory. Providers ship new models faster than any list is updated, so an
unknown name for a known provider gives a warning and the run goes on; providers that serve
whatever the user pulled (local servers, OpenRouter, any OpenAI-compatible base URL) accept
every name. Onboarding a model = adding it here (and, if it has API quirks, a row in
capabilities.py).
"""
from __future__ import annotations

from providers.keys import LOCAL_PROVIDERS, provider_of

CATALOG: dict[str, dict[str, tuple[str, ...]]] = {
    # provider: {"quick": (...), "deep": (...)}; the first of each tier is the suggested one
    "offline": {"quick": ("quick",), "deep": ("deep",)},
    "openai": {"quick": ("gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o-mini", "gpt-5-mini",
                         "gpt-5-nano"),
               "deep": ("gpt-4.1", "gpt-4o", "gpt-5", "o3", "o4-mini", "o3-mini")},
    "anthropic": {"quick": ("claude-haiku-4-5", "claude-3-5-haiku-latest"),
                  "deep": ("claude-sonnet-4-5", "claude-opus-4-1", "claude-sonnet-4-0")},
    "gemini": {"quick": ("gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.0-flash"),
               "deep": ("gemini-2.5-pro",)},
    "azure": {"quick": ("gpt-4.1-mini", "gpt-4o-mini"), "deep": ("gpt-4.1", "gpt-4o")},
    "xai": {"quick": ("grok-3-mini", "grok-4-fast-non-reasoning"),
            "deep": ("grok-4", "grok-4-fast-reasoning")},
    "deepseek": {"quick": ("deepseek-chat",), "deep": ("deepseek-reasoner",)},
    "dashscope": {"quick": ("qwen-turbo", "qwen-plus", "qwen-flash"),
                  "deep": ("qwen-max", "qwen3-max", "qwq-plus")},
    "zai": {"quick": ("glm-4.5-air", "glm-4.5-flash"), "deep": ("glm-4.6", "glm-4.5")},
    "minimax": {"quick": ("MiniMax-M2",), "deep": ("MiniMax-M2",)},
    "bedrock": {"quick": ("anthropic.claude-3-5-haiku-20241022-v1:0",),
                "deep": ("anthropic.claude-sonnet-4-5-20250929-v1:0",
                         "anthropic.claude-3-7-sonnet-20250219-v1:0")},
    "ollama": {"quick": ("llama3.1", "qwen2.5", "qwen3"), "deep": ("llama3.1:70b", "qwen3:32b")},
}

#: Providers that accept any model name (they serve whatever the user configured).
ANY_NAME: frozenset[str] = LOCAL_PROVIDERS | {"openrouter"}


def known_models(provider: str) -> tuple[str, ...]:
    tiers = CATALOG.get(provider, {})
    return tuple(dict.fromkeys(m for names in tiers.values() for m in names))


def suggested(provider: str, tier: str) -> str | None:
    names = CATALOG.get(provider, {}).get(tier, ())
    return f"{provider}/{names[0]}" if names else None


def model_warning(model: str, base_url: str | None = None) -> str | None:
    """A warning for a model we cannot vouch for, or None. Never raises: a stale catalog must
    not block a run."""
    provider = provider_of(model)
    name = model.partition("/")[2]
    if provider in ANY_NAME or (provider == "openai" and base_url):
        return None
    if provider not in CATALOG:
        return (f"provider {provider!r} is not in the model catalog; passing {model} to "
                "litellm as is")
    if name not in known_models(provider):
        return (f"model {name!r} is not in the catalog for {provider} (known: "
                f"{', '.join(known_models(provider))}); continuing anyway")
    return None
