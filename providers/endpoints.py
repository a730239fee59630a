"""Where a model call goes, and what that server says about itself.

An *endpoint* is the base URL when one is given (every model behind one local server shares
its slots), else the provider (a hosted API). Local servers describe themselves: llama.cpp's
``/props`` gives its slot count and context size, Ollama's ``/api/show`` a model's context
length, and any OpenAI-compatible server lists its models at ``/v1/models``. A probe is made
once per endpoint with a short timeout; a failed probe means "the server does not say", never
an error (the defaults apply).
"""
from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from providers.keys import provider_of

PROBE_TIMEOUT_S = 2.0
#: Overall cap on one try when nothing is configured: a local server on a laptop may take
#: minutes for a long reply while it keeps producing tokens; hosted APIs answer faster.
DEFAULT_TIMEOUT_S: dict[bool, float] = {True: 1800.0, False: 600.0}
_LOCAL_NAMES = frozenset({"localhost", "host.docker.internal"})
_LOCAL_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile", "hosted_vllm"})


def endpoint_of(model: str, base_url: str | None) -> str:
    """The key calls are limited under: the base URL without a trailing slash, else the
    provider."""
    return base_url.rstrip("/") if base_url else provider_of(model)


def is_local(model: str, base_url: str | None) -> bool:
    """A server on this machine or a private network (loopback, RFC 1918, link-local), or a
    provider that only runs locally."""
    if not base_url:
        return provider_of(model) in _LOCAL_PROVIDERS
    host = (urlsplit(base_url).hostname or "").lower()
    if host in _LOCAL_NAMES or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def server_root(base_url: str) -> str:
    """The server's root URL: llama.cpp and Ollama serve ``/props`` and ``/api/show`` there,
    beside the OpenAI-compatible ``/v1``."""
    root = base_url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


@dataclass(frozen=True)
class ServerFacts:
    """What a local server said about itself; None where it did not say."""
    slots: int | None = None
    context_window: int | None = None
    models: tuple[str, ...] | None = None  # the names /v1/models lists
    tools: bool | None = None  # whether its chat template can call tools
    source: str = "none"
    #: characters per token of its tokenizer on CALIBRATION (llama.cpp ``/tokenize``)
    chars_per_token: float | None = None


def _get(url: str, body: dict | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:  # noqa: S310
        return json.loads(response.read(2_000_000))


def _try(url: str, body: dict | None = None) -> Any:
    try:
        return _get(url, body)
    except (OSError, ValueError, urllib.error.URLError):
        return None


def read_llamacpp_props(props: Any) -> ServerFacts:
    """Slots, context and tool support from a llama.cpp ``/props`` body."""
    if not isinstance(props, dict):
        return ServerFacts()
    settings = props.get("default_generation_settings") or {}
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    slots = props.get("total_slots")
    caps = props.get("chat_template_caps")
    tools = bool(caps.get("supports_tools")) if isinstance(caps, dict) and caps else None
    return ServerFacts(slots=slots if isinstance(slots, int) and slots > 0 else None,
                       context_window=n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None,
                       tools=tools, source="llama.cpp /props")


def read_ollama_show(show: Any) -> ServerFacts:
    """Context length and tool support from an Ollama ``/api/show`` body."""
    if not isinstance(show, dict):
        return ServerFacts()
    info = show.get("model_info") or {}
    ctx = next((v for k, v in info.items() if k.endswith(".context_length")
                and isinstance(v, int)), None) if isinstance(info, dict) else None
    capabilities = show.get("capabilities")
    tools = "tools" in capabilities if isinstance(capabilities, list) else None
    return ServerFacts(context_window=ctx, tools=tools, source="ollama /api/show")


def read_model_list(listing: Any) -> tuple[str, ...] | None:
    """Model names from an OpenAI-compatible ``/v1/models`` body (Ollama's ``/api/tags``
    shape too)."""
    if not isinstance(listing, dict):
        return None
    rows = listing.get("data") or listing.get("models") or []
    names = [r.get("id") or r.get("name") for r in rows if isinstance(r, dict)]
    return tuple(n for n in names if isinstance(n, str) and n) or None


#: A sample of what prompts here hold (a price table, indicator lines, prose), tokenized by
#: the server to measure its tokenizer: small models often spend a token per digit.
CALIBRATION = (
    "date,open,high,low,close,volume\n2024-06-13,440.8500,443.3900,439.3700,441.5800,15954400\n"
    "2024-06-14,438.2800,443.1400,436.7200,442.5700,13582000\nrsi: 61.2473\nmacdh: -0.8127\n"
    "close_50_sma: 425.0964\nThe trend is intact: the close is above its 50-day average, "
    "momentum is cooling and volume confirms neither side. Rating: Overweight.")


def read_tokenize(tokens: Any, text: str = CALIBRATION) -> float | None:
    """Characters per token from a llama.cpp ``/tokenize`` body for ``text``."""
    rows = tokens.get("tokens") if isinstance(tokens, dict) else None
    return round(len(text) / len(rows), 3) if isinstance(rows, list) and rows else None


def probe(model: str, base_url: str) -> ServerFacts:
    """Ask the server at ``base_url`` about itself (blocking; call it in a thread)."""
    root = server_root(base_url)
    models = read_model_list(_try(f"{base_url.rstrip('/')}/models"))
    facts = read_llamacpp_props(_try(f"{root}/props"))
    if facts.source == "none" or facts.context_window is None:
        name = model.split("/", 1)[-1]
        shown = read_ollama_show(_try(f"{root}/api/show", {"model": name}))
        if shown.context_window is not None:
            facts = shown
    ratio = read_tokenize(_try(f"{root}/tokenize", {"content": CALIBRATION}))
    return ServerFacts(slots=facts.slots, context_window=facts.context_window,
                       models=models, tools=facts.tools, source=facts.source,
                       chars_per_token=ratio)


@dataclass(frozen=True)
class ModelProfile:
    """What a role needs to know before it builds a prompt, as the gateway resolved it."""
    context_window: int | None  # tokens; None: unknown, prompts are sent as built
    context_source: str  # "--context-window", "capability table", "llama.cpp /props", ...
    tools: bool  # whether to offer tools (else the role calls the default tools itself)
    tools_source: str
    concurrency: int
    local: bool
    #: characters per token to estimate prompts with: the server's tokenizer as measured
    #: (``/tokenize``, and the prompt tokens of earlier replies), never above the default
    chars_per_token: float = 3.0
