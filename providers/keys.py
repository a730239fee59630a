"""The one provider -> API-key map: which variables each hosted provider needs.

Each entry of ``KEY_ENV[provider]`` is an alternative; an entry "A+B" needs both variables
(AWS Bedrock: access key id and secret, or a named profile). The variable names are the ones
litellm itself reads, so setting the variable we name is all a user has to do. Local servers
(Ollama, LM Studio, vLLM, llama.cpp behind ``openai/<name>`` with a base URL) need no key.

A leaf: plain data and functions over the environment, importing nothing of ours. The check
run before a run starts is ``providers.credentials``; redaction is ``providers.redaction``.
"""
from __future__ import annotations

import os

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


def provider_of(model: str) -> str:
    """The provider prefix of a ``provider/model`` id ("openai/gpt-4.1" -> "openai")."""
    provider, sep, _ = (model or "").partition("/")
    return provider.strip().lower() if sep else ""


def env_is_set(name: str) -> bool:
    return bool(os.environ.get(name, "").strip())


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


def secret_values() -> list[str]:
    """Current values of every key variable we know (for redaction); longest first."""
    names = {n for alts in KEY_ENV.values() for alt in alts for n in alt.split("+")}
    names.discard("AWS_PROFILE")  # a profile name is not a secret
    names.add("ALPHA_VANTAGE_API_KEY")  # a data vendor's key, as secret as a model's
    values = [os.environ[n].strip() for n in names if len(os.environ.get(n, "").strip()) >= 6]
    return sorted(set(values), key=len, reverse=True)
