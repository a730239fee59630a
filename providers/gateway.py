"""The LLM gateway: the one place every model call of every run goes through.

One instance lives in a Ray actor and serves all runs, which is what makes provider
concurrency caps, retries and usage accounting global instead of per role or per run. It is
plain Python (no Ray here), so a unit test can drive it directly.

* ``offline/*`` models go to the deterministic offline provider; everything else to litellm.
* 429, timeouts and 5xx are retried with exponential backoff and jitter, at most
  ``request.max_retries`` times; 401/403, 400 and config errors fail at once. Every try is an
  ``Attempt`` in the reply (or in ``LLMError.attempts``), so the event shows the failures.
* A limiter per endpoint (the base URL, else the provider) caps calls in flight; it is not
  held while backing off, and the time a call waits for it is recorded (``queued_ms``), never
  counted against a timeout. The limit is the request's ``concurrency`` (``--llm-concurrency``),
  else the server's slot count (llama.cpp ``/props``), else 1 for a local server and the
  per-provider default for hosted APIs.
* Replies stream; ``streams()`` lists the calls streaming now with their tokens/s, for the
  live progress.
* ``profile()`` tells a role a model's context window and whether it can call tools, from
  ``--context-window``, the server (probed once per endpoint) and the capability table.
"""
from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from events.records import Attempt
from providers import litellm_client, offline
from providers.base import LLMError, LLMReply, LLMRequest, provider_of
from providers.capabilities import resolve
from providers.credentials import require_key
from providers.endpoints import (DEFAULT_TIMEOUT_S, ModelProfile, ServerFacts, endpoint_of,
                                 is_local, probe)
from providers.fitting import CHARS_PER_TOKEN, estimate_tokens
from providers.limiter import Limiter

log = structlog.get_logger("providers.gateway")

#: Calls in flight per hosted provider unless configured; "*" is the fallback for the rest.
#: A local server (base URL on this machine or a private network) gets LOCAL_CONCURRENCY
#: unless it reports its slots.
DEFAULT_CONCURRENCY: dict[str, int] = {"offline": 256, "ollama": 2, "ollama_chat": 2,
                                       "lm_studio": 2, "llamafile": 1, "*": 8}
LOCAL_CONCURRENCY = 1
NOTHING_SAID_TTL_S = 60.0
#: A tokenizer measured on one sample is trusted to 90% on other text.
CALIBRATION_MARGIN = 0.9
MAX_BACKOFF_S = 60.0


@dataclass
class _Stream:
    """One call streaming now."""
    run_id: str | None
    role: str
    model: str
    started: float
    first_at: float | None = None
    chunks: int = 0


class LLMGateway:
    def __init__(self, concurrency_per_provider: Mapping[str, int] | None = None,
                 retry_base_s: float = 1.0) -> None:
        self._configured = dict(concurrency_per_provider or {})
        self._limits = {**DEFAULT_CONCURRENCY, **self._configured}
        self._limiters: dict[str, Limiter] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry_base_s = retry_base_s
        self._memory = litellm_client.ReasoningMemory()
        self._usage: dict[str, dict] = {}
        #: what each server said, and when: probed once (a server that said nothing at
        #: all, e.g. not started yet, is asked again after NOTHING_SAID_TTL_S)
        self._facts: dict[str, tuple[ServerFacts, float]] = {}
        self._probing: dict[str, asyncio.Task] = {}
        self._streams: dict[int, _Stream] = {}  # calls streaming now (live progress)
        #: the lowest characters per prompt token seen in replies, per endpoint
        self._learned_ratio: dict[str, float] = {}
        self._next_stream = 0

    def warm_up(self) -> None:
        """Import litellm now (seconds) rather than inside the first model call's timeout."""
        litellm_client._litellm()

    @property
    def peak_in_flight(self) -> dict[str, int]:
        """Highest concurrency seen, per endpoint."""
        return {key: limiter.peak for key, limiter in self._limiters.items()}

    # ---- what an endpoint is -------------------------------------------------------------
    async def facts(self, model: str, base_url: str | None) -> ServerFacts:
        """What a local server says about itself (probed once per endpoint, cached)."""
        if not base_url or provider_of(model) == "offline":
            return ServerFacts()
        key = endpoint_of(model, base_url)
        known = self._facts.get(key)
        if known is not None and (known[0] != ServerFacts()
                                  or time.monotonic() - known[1] < NOTHING_SAID_TTL_S):
            return known[0]
        task = self._probing.get(key)
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            task = asyncio.ensure_future(asyncio.to_thread(probe, model, base_url))
            self._probing[key] = task
        found = await task
        self._facts[key] = (found, time.monotonic())
        log.info("llm_endpoint_probed", endpoint=key, slots=found.slots,
                 context_window=found.context_window, tools=found.tools, source=found.source)
        return found

    async def _limit_for(self, request: LLMRequest) -> int:
        """--llm-concurrency, else the server's slots, else a configured per-provider cap,
        else 1 for a local server, else the provider's default."""
        provider = provider_of(request.model)
        if request.concurrency:
            return request.concurrency
        if provider != "offline" and request.base_url and is_local(request.model,
                                                                    request.base_url):
            found = await self.facts(request.model, request.base_url)
            return found.slots or self._configured.get(provider) or LOCAL_CONCURRENCY
        return self._limits.get(provider, self._limits["*"])

    async def _limiter(self, request: LLMRequest) -> Limiter:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # asyncio primitives bind to one loop (tests use several)
            self._loop, self._limiters, self._probing = loop, {}, {}
        key = endpoint_of(request.model, request.base_url)
        limit = await self._limit_for(request)
        limiter = self._limiters.get(key)
        if limiter is None:
            limiter = self._limiters[key] = Limiter(limit)
        elif limiter.limit != limit:
            await limiter.set_limit(limit)
        return limiter

    async def profile(self, model: str, base_url: str | None = None, *,
                      context_window: int | None = None,
                      concurrency: int | None = None) -> ModelProfile:
        """A model's context window and tool calling, for the role building a prompt:
        ``--context-window`` wins, then what the server says, then the capability table."""
        caps = resolve(model)
        local = provider_of(model) != "offline" and is_local(model, base_url)
        found = await self.facts(model, base_url) if local else ServerFacts()
        window, window_source = next(
            ((value, source) for value, source in (
                (context_window, "--context-window"), (found.context_window, found.source),
                (caps.context_window, f"capability table ({caps.source})"))
             if value), (None, "unknown"))
        if not caps.tools:
            tools, tools_source = False, f"capability table ({caps.source})"
        elif found.tools is False:
            tools, tools_source = False, found.source
        else:
            tools, tools_source = True, f"capability table ({caps.source})"
        request = LLMRequest(model=model, base_url=base_url, messages=[], role="profile",
                             concurrency=concurrency)
        limit = await self._limit_for(request) if provider_of(model) else 1
        ratios = [CHARS_PER_TOKEN, self._learned_ratio.get(endpoint_of(model, base_url),
                                                           CHARS_PER_TOKEN)]
        if found.chars_per_token:
            ratios.append(found.chars_per_token * CALIBRATION_MARGIN)
        return ModelProfile(context_window=window, context_source=window_source, tools=tools,
                            tools_source=tools_source, concurrency=limit, local=local,
                            chars_per_token=round(min(ratios), 3))

    def _learn_ratio(self, request: LLMRequest, input_tokens: int) -> None:
        """Characters per prompt token as the server counted them (the gateway's own
        additions and the chat template make this a little low: on the safe side)."""
        chars = sum(len(m.content) for m in request.messages)
        if input_tokens > 0 and chars > 0:
            key = endpoint_of(request.model, request.base_url)
            seen = chars / input_tokens
            self._learned_ratio[key] = min(seen, self._learned_ratio.get(key, seen))

    # ---- live streams --------------------------------------------------------------------
    def streams(self) -> list[dict]:
        """Calls streaming now: run, role, model, tokens so far and tokens/s since the first
        token (a streamed chunk is about one token on OpenAI-compatible servers)."""
        now = time.perf_counter()
        rows = []
        for row in self._streams.values():
            elapsed = now - row.first_at if row.first_at else 0.0
            rows.append({"run_id": row.run_id, "role": row.role, "model": row.model,
                         "tokens": row.chunks, "seconds": round(now - row.started, 1),
                         "tokens_per_s": round(row.chunks / elapsed, 1)
                         if elapsed > 0.2 else None})
        return rows

    @contextlib.contextmanager
    def _streaming(self, request: LLMRequest):
        self._next_stream += 1
        number = self._next_stream
        row = _Stream(run_id=request.run_id, role=request.role, model=request.model,
                      started=time.perf_counter())
        self._streams[number] = row

        def on_chunk(_size: int) -> None:
            if row.first_at is None:
                row.first_at = time.perf_counter()
            row.chunks += 1

        try:
            yield on_chunk
        finally:
            self._streams.pop(number, None)

    # ---- one call ------------------------------------------------------------------------
    async def complete(self, request: LLMRequest) -> LLMReply:
        provider = provider_of(request.model)
        started = time.perf_counter()
        if not provider:
            raise LLMError(f"model {request.model!r} must be written provider/model, "
                           "e.g. openai/gpt-4.1-mini or offline/quick", "config")
        if provider == "offline":
            async with (await self._limiter(request)).slot() as queued_ms:
                reply = await offline.complete(request)
            reply = reply.model_copy(update={"queued_ms": round(queued_ms, 1)})
            self._account(request.model, provider, reply=reply)
            return reply
        try:
            require_key(request.model, request.base_url)
        except LLMError as exc:  # the command line saw the key, this process does not
            raise type(exc)(f"{exc.message}; the LLM gateway is a long-lived Ray actor and "
                            "only sees variables set before Ray started (on a cluster: in "
                            "the nodes' environment, see ray_cluster.yaml)") from None
        caps = resolve(request.model)
        self._refuse_oversized(request)
        local = is_local(request.model, request.base_url)
        overall_s = request.timeout_s or DEFAULT_TIMEOUT_S[local]
        attempts: list[Attempt] = []
        waited, queued = 0.0, 0.0
        for number in range(1, max(0, request.max_retries) + 2):
            try:
                async with (await self._limiter(request)).slot() as queued_ms:
                    queued += queued_ms
                    with self._streaming(request) as on_chunk:
                        raw = await litellm_client.call(request, caps, self._memory,
                                                        overall_s=overall_s, on_chunk=on_chunk)
            except LLMError as err:
                attempts.append(Attempt(number=number, error=str(err), status=err.status,
                                        waited_s=round(waited, 3)))
                log.warning("llm_attempt_failed", model=request.model, role=request.role,
                            attempt=number, kind=err.kind, status=err.status)
                if not err.retryable or number > request.max_retries:
                    err = await self._explained(err, request)
                    err.attempts = attempts
                    self._account(request.model, provider, failed=True, tries=len(attempts))
                    raise err
                waited = self._backoff(number, err.retry_after)
                await asyncio.sleep(waited)
                continue
            attempts.append(Attempt(number=number, status=200, waited_s=round(waited, 3)))
            reply = LLMReply(
                text=raw.text, tool_calls=raw.tool_calls, structured=raw.structured,
                output_mode=raw.output_mode, input_tokens=raw.input_tokens,
                output_tokens=raw.output_tokens, cost_usd=raw.cost_usd,
                latency_ms=(time.perf_counter() - started) * 1000, attempts=attempts,
                provider=provider, model=request.model, queued_ms=round(queued, 1),
                stream_chunks=raw.stream_chunks,
                first_chunk_ms=None if raw.first_chunk_ms is None
                else round(raw.first_chunk_ms, 1))
            self._account(request.model, provider, reply=reply)
            self._learn_ratio(request, raw.input_tokens)
            return reply
        raise AssertionError("unreachable: the loop returns or raises")

    @staticmethod
    def _refuse_oversized(request: LLMRequest) -> None:
        """Never send a prompt the server must reject: the caller fitted the messages to
        ``context_window``; a request still over it is refused here, unsent."""
        if not request.context_window:
            return
        need = estimate_tokens(request.messages, request.tools,
                               chars_per_token=request.chars_per_token) + (
                                   request.max_output_tokens or 0)
        if need > request.context_window:
            raise LLMError(f"{request.model}: {request.role}'s prompt needs about {need:,} "
                           f"tokens with its reply, over the {request.context_window:,}-token "
                           "context window even condensed; use a model with a larger context "
                           "(or start the server with one)", "context")

    async def _explained(self, err: LLMError, request: LLMRequest) -> LLMError:
        """A model name the server does not know: say which names it lists."""
        if err.kind != "not_found" or not request.base_url:
            return err
        found = await self.facts(request.model, request.base_url)
        if not found.models:
            return err
        names = ", ".join(found.models[:10])
        name = request.model.split("/", 1)[-1]
        explained = LLMError(f"{request.model}: the server at {request.base_url} has no model "
                             f"{name!r}; it lists: {names} (use e.g. --quick-model "
                             f"{provider_of(request.model)}/{found.models[0]})", "not_found",
                             status=err.status)
        return explained

    def _backoff(self, number: int, retry_after: float | None) -> float:
        """base * 2^(n-1), plus up to 25% jitter so parallel runs do not retry in step; a
        provider's Retry-After wins when longer."""
        delay = self._retry_base_s * (2 ** (number - 1))
        delay *= 1.0 + random.uniform(0.0, 0.25)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, MAX_BACKOFF_S)

    def _account(self, model: str, provider: str, reply: LLMReply | None = None,
                 failed: bool = False, tries: int = 0) -> None:
        row = self._usage.setdefault(model, {
            "provider": provider, "calls": 0, "failed_calls": 0, "attempts": 0,
            "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})
        if failed:
            row["failed_calls"] += 1
            row["attempts"] += tries
            return
        assert reply is not None
        row["calls"] += 1
        row["attempts"] += len(reply.attempts)
        row["input_tokens"] += reply.input_tokens
        row["output_tokens"] += reply.output_tokens
        row["cost_usd"] += reply.cost_usd

    def usage(self) -> dict:
        """Accounting since start, keyed by "provider/model"; each row has provider, calls,
        failed_calls, attempts, input_tokens, output_tokens and cost_usd."""
        return {model: dict(row) for model, row in self._usage.items()}
