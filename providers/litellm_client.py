"""One model call through litellm, shaped by the capability table.

This module makes exactly one HTTP request per call (litellm's and the OpenAI SDK's own
retries are switched off: the gateway retries, so every try is visible in the event) and turns
any provider exception into an ``LLMError`` with a kind the gateway can act on. litellm is
imported lazily: importing it costs seconds and role actors never should.

Replies are streamed: a try fails when no chunk has come for ``request.idle_timeout_s``, or
when the whole try passes its overall cap, so a slow model that keeps producing tokens
finishes. The chunks are assembled into the same complete reply (text, tool calls, usage) a
non-streamed call returns, so the recorded event does not depend on streaming.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from events.decisions import OutputMode
from events.records import ToolCall
from providers import structured as st
from providers.base import ErrorKind, LLMError, LLMRequest, one_line, provider_of
from providers.capabilities import Capabilities
from providers.keys import KEY_ENV, LOCAL_PLACEHOLDER_KEY, describe, key_present, needs_key


def _litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def language_instruction(language: str) -> str:
    return (f"Write your whole answer in {language}. Keep the rating words Buy, Overweight, "
            "Hold, Underweight, Sell and the actions Buy, Hold, Sell in English, exactly as "
            "written here, and keep every number exactly as given.")


class ReasoningMemory:
    """reasoning_content of recent tool-call turns, keyed by tool-call id. Thinking models
    such as deepseek-reasoner reject the next request unless it is sent back, but our
    ``Message`` record (and so the event) does not carry it; the gateway remembers it."""

    def __init__(self, limit: int = 2048) -> None:
        self._items: OrderedDict[str, str] = OrderedDict()
        self._limit = limit

    def remember(self, calls: list[ToolCall], reasoning: str | None) -> None:
        for call in calls:
            self._items[call.id] = reasoning or ""
            self._items.move_to_end(call.id)
        while len(self._items) > self._limit:
            self._items.popitem(last=False)

    def recall(self, calls: list[ToolCall]) -> str:
        return next((self._items[c.id] for c in calls if c.id in self._items), "")


def to_wire_messages(request: LLMRequest, caps: Capabilities,
                     memory: ReasoningMemory | None = None, hint: str | None = None) -> list[dict]:
    """OpenAI-format messages; the language instruction (and a structure hint) joins the first
    system message, since several local chat templates reject a second system message."""
    out: list[dict[str, Any]] = []
    for m in request.messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            item["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                "name": c.name, "arguments": json.dumps(c.arguments)}} for c in m.tool_calls]
            if caps.resend_reasoning:
                item["reasoning_content"] = memory.recall(m.tool_calls) if memory else ""
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
            if m.name:
                item["name"] = m.name
        out.append(item)
    extra = "\n\n".join(x for x in (language_instruction(request.output_language), hint) if x)
    if out and out[0]["role"] == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{extra}"
    else:
        out.insert(0, {"role": "system", "content": extra})
    return out


def _freetext_hint(schema: str) -> str:
    fields = st.schema_class(schema).model_fields
    labels = ", ".join(f"'{name.replace('_', ' ').title()}:'" for name in fields)
    return f"Structure the answer with these labelled sections: {labels}."


@dataclass
class Plan:
    """How this call asks for structure: "structured" (json_schema), "tool" or "freetext"."""
    mode: OutputMode
    schema: str | None


def plan_for(request: LLMRequest, caps: Capabilities) -> Plan:
    if not request.output_schema:
        return Plan("freetext", None)
    st.schema_class(request.output_schema)  # unknown names fail as config errors
    if caps.json_schema:
        return Plan("structured", request.output_schema)
    if caps.tools:
        return Plan("tool", request.output_schema)
    return Plan("freetext", request.output_schema)


def build_kwargs(request: LLMRequest, caps: Capabilities, plan: Plan,
                 memory: ReasoningMemory | None = None) -> dict[str, Any]:
    hint = _freetext_hint(plan.schema) if plan.mode == "freetext" and plan.schema else None
    kwargs: dict[str, Any] = {
        "model": request.model, "messages": to_wire_messages(request, caps, memory, hint),
        "max_retries": 0, "num_retries": 0, "drop_params": True,
        "stream": True, "stream_options": {"include_usage": True},
    }
    if request.timeout_s is not None:
        kwargs["timeout"] = request.timeout_s
    if request.max_output_tokens:
        kwargs["max_tokens"] = request.max_output_tokens
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                               "parameters": t.parameters}}
             for t in request.tools] if caps.tools else []
    if plan.mode == "structured" and plan.schema:
        kwargs["response_format"] = st.response_format(plan.schema)
    elif plan.mode == "tool" and plan.schema:
        tools.append(st.schema_tool(plan.schema))
        if caps.tool_choice:
            kwargs["tool_choice"] = {"type": "function",
                                     "function": {"name": st.tool_name(plan.schema)}}
    if tools:
        kwargs["tools"] = tools
    if request.temperature is not None and caps.temperature:
        kwargs["temperature"] = request.temperature
    if caps.extra_body:
        kwargs["extra_body"] = dict(caps.extra_body)
    if request.base_url:
        kwargs["api_base"] = request.base_url
        if not needs_key(provider_of(request.model), request.base_url) and not key_present(
                provider_of(request.model)):
            kwargs["api_key"] = LOCAL_PLACEHOLDER_KEY
    return kwargs


@dataclass
class RawResult:
    text: str
    tool_calls: list[ToolCall]
    structured: dict | None
    output_mode: OutputMode
    input_tokens: int
    output_tokens: int
    cost_usd: float
    stream_chunks: int = 0
    first_chunk_ms: float | None = None


def _arguments(raw: Any) -> dict:
    if isinstance(raw, dict):
        return raw
    parsed = st.loads_lenient(raw or "{}")
    return parsed if isinstance(parsed, dict) else {"_unparsed": str(raw)}


def interpret(response: Any, plan: Plan, memory: ReasoningMemory | None = None) -> RawResult:
    """Text, tool calls and (when asked) a validated decision from a chat completion."""
    message = response.choices[0].message
    text = message.content if isinstance(message.content, str) else ""
    calls = [ToolCall(id=c.id or f"call_{i}", name=c.function.name,
                      arguments=_arguments(c.function.arguments))
             for i, c in enumerate(message.tool_calls or [])]
    if memory is not None and calls:
        memory.remember(calls, getattr(message, "reasoning_content", None))
    decision: dict | None = None
    mode: OutputMode = "freetext"
    if plan.schema:
        if plan.mode == "structured":
            decision = st.validate(plan.schema, text)
            mode = "structured"
        elif plan.mode == "tool":
            submitted = [c for c in calls if c.name == st.tool_name(plan.schema)]
            calls = [c for c in calls if c.name != st.tool_name(plan.schema)]
            decision = st.validate(plan.schema, submitted[0].arguments) if submitted else None
            if decision is None and submitted and not text:
                text = json.dumps(submitted[0].arguments)  # weak model: keep what it said
            mode = "tool"
        if decision is None:  # could not or did not comply: parse the prose
            decision, mode = st.from_freetext(plan.schema, text), "freetext"
        elif mode in ("structured", "tool"):
            text = st.render(plan.schema, decision)
    usage = getattr(response, "usage", None)
    return RawResult(text=text or "", tool_calls=calls, structured=decision, output_mode=mode,
                     input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                     output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                     cost_usd=_cost(response))


def _cost(response: Any) -> float:
    hidden = getattr(response, "_hidden_params", {}) or {}
    if hidden.get("response_cost") is not None:
        return float(hidden["response_cost"])
    try:
        return float(_litellm().completion_cost(completion_response=response) or 0.0)
    except Exception:  # unknown or local model: no price known  # noqa: BLE001
        return 0.0


class IdleTimeout(asyncio.TimeoutError):
    """No chunk arrived for the idle timeout."""


class OverallTimeout(asyncio.TimeoutError):
    """The try ran past its overall cap (while chunks were still arriving)."""


#: Told about every content chunk as it arrives (the gateway's live stream table).
OnChunk = Callable[[int], None]


def _chunk_size(chunk: Any) -> int:
    """Characters of answer in one streamed chunk (content and tool-call arguments)."""
    try:
        delta = chunk.choices[0].delta
    except (AttributeError, IndexError):
        return 0
    size = len(getattr(delta, "content", None) or "")
    for call in getattr(delta, "tool_calls", None) or []:
        function = getattr(call, "function", None)
        size += len(getattr(function, "arguments", None) or "") + len(
            getattr(function, "name", None) or "")
    return size


async def stream_reply(kwargs: dict[str, Any], *, idle_s: float, overall_s: float,
                       on_chunk: OnChunk | None = None) -> tuple[Any, int, float | None]:
    """The complete response of one streamed call, its chunk count and the time to its
    first chunk (ms). Raises IdleTimeout / OverallTimeout; provider errors pass through."""
    litellm = _litellm()
    started = time.perf_counter()
    deadline = started + overall_s

    async def next_within(awaitable: Any) -> Any:
        left = deadline - time.perf_counter()
        if left <= 0:
            raise OverallTimeout()
        try:
            return await asyncio.wait_for(awaitable, timeout=min(idle_s, left))
        except asyncio.TimeoutError:
            raise (IdleTimeout() if left > idle_s else OverallTimeout()) from None

    stream = await next_within(litellm.acompletion(**kwargs))
    chunks: list[Any] = []
    first: float | None = None
    iterator = stream.__aiter__()
    while True:
        try:
            chunk = await next_within(iterator.__anext__())
        except StopAsyncIteration:
            break
        chunks.append(chunk)
        size = _chunk_size(chunk)
        if size and first is None:
            first = (time.perf_counter() - started) * 1000
        if size and on_chunk is not None:
            on_chunk(size)
    response = litellm.stream_chunk_builder(chunks, messages=kwargs["messages"])
    if response is None:
        raise IdleTimeout()  # the server closed the stream without a single chunk
    return response, len(chunks), first


async def call(request: LLMRequest, caps: Capabilities,
               memory: ReasoningMemory | None = None, *, overall_s: float | None = None,
               on_chunk: OnChunk | None = None) -> RawResult:
    """One streamed try. Raises LLMError (kind set, message redacted) on any provider
    failure, on an idle stream and past the overall cap (``overall_s``, else the request's
    ``timeout_s``, else 600 s)."""
    overall_s = overall_s or request.timeout_s or 600.0
    plan = plan_for(request, caps)
    kwargs = build_kwargs(request, caps, plan, memory)
    kwargs["timeout"] = overall_s + 5.0  # the SDK's own timeout only backs ours up
    try:
        response, chunks, first = await stream_reply(
            kwargs, idle_s=request.idle_timeout_s, overall_s=overall_s, on_chunk=on_chunk)
    except Exception as exc:  # noqa: BLE001 - classified below, unknown ones re-raised
        raise classify(exc, request, overall_s=overall_s) from None
    result = interpret(response, plan, memory)
    result.stream_chunks, result.first_chunk_ms = chunks, first
    return result


_PHRASE = {"auth": "the provider rejected the credentials", "bad_request": "the provider "
           "rejected the request", "rate_limit": "rate limited", "timeout": "no answer in time",
           "server": "provider-side failure", "not_found": "model or endpoint not found",
           "config": "configuration problem",
           "context": "the prompt does not fit the model's context window"}

#: How servers say a prompt is longer than the context (llama.cpp, OpenAI, vLLM, Ollama).
_CONTEXT_EXCEEDED = re.compile(r"exceed_context_size|context[_ ]length[_ ]exceeded|exceeds the "
                               r"available context|maximum context length|context window|"
                               r"too many tokens|prompt is too long", re.IGNORECASE)


_ERROR_PREFIX = re.compile(r"^(?:\s*[A-Za-z]*(?:Error|Exception)\s*[:\-]\s*)+")


def classify(exc: BaseException, request: LLMRequest, *,
             overall_s: float | None = None) -> BaseException:
    """The LLMError for a provider exception; programming errors pass through unchanged."""
    import openai

    litellm = _litellm()
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    detail = _ERROR_PREFIX.sub("", str(exc).replace("litellm.", "")).strip()
    kind: ErrorKind
    if isinstance(exc, IdleTimeout):
        kind, status = "timeout", None
        detail = f"no token for {request.idle_timeout_s:g} s (--llm-idle-timeout)"
    elif isinstance(exc, (asyncio.TimeoutError, litellm.Timeout, openai.APITimeoutError)):
        kind, status = "timeout", (status if status and status != 408 else None)
        cap = overall_s if overall_s is not None else request.timeout_s
        detail = (f"no complete reply within {cap:g} s (--llm-timeout)" if cap is not None
                  else "no reply in time")
    elif (isinstance(exc, openai.APIConnectionError) and not isinstance(
            exc, openai.APIStatusError)) or detail.lower().startswith("connection error"):
        # litellm reports a refused connection as an InternalServerError "Connection error."
        kind = "server"
        detail = (f"could not connect to {request.base_url}: is the server running? Start it "
                  "(e.g. `ollama serve`, `llama-server -m MODEL.gguf`) or fix --base-url"
                  if request.base_url else f"could not connect to the provider: {detail}")
        status = None
    elif isinstance(exc, litellm.ContextWindowExceededError) or (
            status in (400, 413, None) and _CONTEXT_EXCEEDED.search(detail)):
        kind = "context"
    elif not isinstance(exc, (openai.OpenAIError, litellm.exceptions.APIError)) and status is None:
        return exc
    elif status in (401, 403):
        kind = "auth"
    elif status == 429:
        kind = "rate_limit"
    elif status == 404:
        kind = "not_found"
    elif status in (400, 413, 422) or isinstance(exc, openai.BadRequestError):
        kind = "config" if "LLM Provider NOT provided" in detail else "bad_request"
    else:
        kind = "server"
    provider = provider_of(request.model)
    advice = ""
    if kind == "auth" and provider in KEY_ENV:
        advice = f"; check {describe(provider)}"
    code = f" (HTTP {status})" if status else ""
    error = LLMError(f"{request.model}: {_PHRASE[kind]}{code}{advice} - {one_line(detail, 320)}",
                     kind, status=status)
    error.retry_after = _retry_after(exc)
    return error


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None
