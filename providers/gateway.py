"""The LLM gateway: the one place every model call of every run goes through.

One instance lives in a Ray actor and serves all runs, which is what makes provider
concurrency caps, retries and usage accounting global instead of per role or per run. It is
plain Python (no Ray here), so a unit test can drive it directly.

* ``offline/*`` models go to the deterministic offline provider; everything else to litellm.
* 429, timeouts and 5xx are retried with exponential backoff and jitter, at most
  ``request.max_retries`` times; 401/403, 400 and config errors fail at once. Every try is an
  ``Attempt`` in the reply (or in ``LLMError.attempts``), so the event shows the failures.
* A semaphore per provider caps calls in flight; it is not held while backing off.
"""
from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Mapping

import structlog

from events.records import Attempt
from providers import litellm_client, offline
from providers.base import LLMError, LLMReply, LLMRequest, provider_of
from providers.capabilities import resolve
from providers.credentials import require_key

log = structlog.get_logger("providers.gateway")

#: Calls in flight per provider unless configured; "*" is the fallback for the rest.
DEFAULT_CONCURRENCY: dict[str, int] = {"offline": 256, "ollama": 2, "ollama_chat": 2,
                                       "lm_studio": 2, "llamafile": 1, "*": 8}
MAX_BACKOFF_S = 60.0


class LLMGateway:
    def __init__(self, concurrency_per_provider: Mapping[str, int] | None = None,
                 retry_base_s: float = 1.0) -> None:
        self._limits = {**DEFAULT_CONCURRENCY, **dict(concurrency_per_provider or {})}
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry_base_s = retry_base_s
        self._memory = litellm_client.ReasoningMemory()
        self._usage: dict[str, dict] = {}
        self._in_flight: dict[str, int] = {}
        self.peak_in_flight: dict[str, int] = {}  # highest concurrency seen, per provider

    def warm_up(self) -> None:
        """Import litellm now (seconds) rather than inside the first model call's timeout."""
        litellm_client._litellm()

    def _semaphore(self, provider: str) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # semaphores bind to one loop (tests use several)
            self._loop, self._semaphores = loop, {}
        if provider not in self._semaphores:
            limit = self._limits.get(provider, self._limits["*"])
            self._semaphores[provider] = asyncio.Semaphore(max(1, int(limit)))
        return self._semaphores[provider]

    async def complete(self, request: LLMRequest) -> LLMReply:
        provider = provider_of(request.model)
        started = time.perf_counter()
        if not provider:
            raise LLMError(f"model {request.model!r} must be written provider/model, "
                           "e.g. openai/gpt-4.1-mini or offline/quick", "config")
        if provider == "offline":
            async with self._slot(provider):
                reply = await offline.complete(request)
            self._account(request.model, provider, reply=reply)
            return reply
        try:
            require_key(request.model, request.base_url)
        except LLMError as exc:  # the command line saw the key, this process does not
            raise type(exc)(f"{exc.message}; the LLM gateway is a long-lived Ray actor and "
                            "only sees variables set before Ray started (on a cluster: in "
                            "the nodes' environment, see ray_cluster.yaml)") from None
        caps = resolve(request.model)
        attempts: list[Attempt] = []
        waited = 0.0
        for number in range(1, max(0, request.max_retries) + 2):
            try:
                async with self._slot(provider):
                    raw = await litellm_client.call(request, caps, self._memory)
            except LLMError as err:
                attempts.append(Attempt(number=number, error=str(err), status=err.status,
                                        waited_s=round(waited, 3)))
                log.warning("llm_attempt_failed", model=request.model, role=request.role,
                            attempt=number, kind=err.kind, status=err.status)
                if not err.retryable or number > request.max_retries:
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
                provider=provider, model=request.model)
            self._account(request.model, provider, reply=reply)
            return reply
        raise AssertionError("unreachable: the loop returns or raises")

    def _backoff(self, number: int, retry_after: float | None) -> float:
        """base * 2^(n-1), plus up to 25% jitter so parallel runs do not retry in step; a
        provider's Retry-After wins when longer."""
        delay = self._retry_base_s * (2 ** (number - 1))
        delay *= 1.0 + random.uniform(0.0, 0.25)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, MAX_BACKOFF_S)

    @contextlib.asynccontextmanager
    async def _slot(self, provider: str):
        semaphore = self._semaphore(provider)
        async with semaphore:
            count = self._in_flight.get(provider, 0) + 1
            self._in_flight[provider] = count
            self.peak_in_flight[provider] = max(count, self.peak_in_flight.get(provider, 0))
            try:
                yield
            finally:
                self._in_flight[provider] -= 1

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
