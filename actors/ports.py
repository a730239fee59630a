"""What the plain-Python cores (the run driver, a role's turn, outcome scoring) need from the
outside world, as Protocols, plus in-process adapters for tests and single-process use.

Ray adapters for the same Protocols live in ``actors.remote``; nothing here imports Ray, so
the cores run under a unit test on the in-memory store in milliseconds.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Sequence
from typing import Any, Protocol

from events.envelope import NewEvent, StoredEvent
from events.errors import one_line
from events.records import Instrument, MarketSnapshot, ToolResult


#: A tool call's answer: its result, or the reason no vendor answered; and its latency (ms).
ToolAnswer = tuple[ToolResult | None, str | None, float]


class InfraError(RuntimeError):
    """A part of the system (not the market, not the model) failed and stayed down: an actor
    died and did not come back, a node left, the store was unreachable. Never recorded as a
    fact about the market; the run fails saying so and can be resumed."""

    def __init__(self, component: str, reason: str):
        super().__init__(f"{component} unavailable: {reason}")
        self.component = component


#: What an append tells the cores: each event's (seq, position). They hold the payloads.
Appended = list[tuple[int, int]]


class StorePort(Protocol):
    async def append(self, stream: str, events: Sequence[NewEvent], *,
                     expected_version: int | None = None,
                     idempotency_key: str | None = None) -> Appended: ...

    async def read_stream(self, stream: str, *, from_seq: int = 1) -> list[StoredEvent]: ...

    async def read_all(self, *, after_position: int = 0, limit: int | None = None,
                       types: Sequence[str] | None = None) -> list[StoredEvent]: ...

    async def query(self, name: str, params: dict) -> list[dict]:
        """A named read-model query (projections.views), reflecting every committed event."""
        ...


class LLMPort(Protocol):
    async def complete(self, request: Any) -> Any: ...

    async def profile(self, model: str, base_url: str | None = None, *,
                      context_window: int | None = None,
                      concurrency: int | None = None) -> Any:
        """A model's context window and tool calling (providers.endpoints.ModelProfile)."""
        ...


class MarketPort(Protocol):
    async def identity(self, config: Any) -> Instrument: ...

    async def snapshot(self, config: Any) -> MarketSnapshot | None: ...

    async def call_tools(self, calls: list[tuple[str, dict]], trade_date: dt.date,
                         config: Any) -> list[ToolAnswer]:
        """Several tool calls of one model reply, in one round trip: each answer is
        (result, None, latency_ms), or (None, why no vendor answered, latency_ms)."""
        ...

    async def closes(self, config: Any, symbol: str, start: dt.date,
                     end: dt.date) -> list[tuple[dt.date, float]]: ...

    async def benchmark_for(self, config: Any) -> str: ...


class LocalStore:
    """A StorePort over a store object in this process (in-memory or a DuckDB file), with
    its read models kept beside it."""

    def __init__(self, store: Any):
        from events.views import open_views
        from projections.views import VIEWS
        self.store = store
        self.views = open_views(store, VIEWS)

    async def query(self, name: str, params: dict) -> list[dict]:
        self.views.catch_up(self.store)
        return self.views.query(name, params)

    async def append(self, stream: str, events: Sequence[NewEvent], *,
                     expected_version: int | None = None,
                     idempotency_key: str | None = None) -> Appended:
        stored = self.store.append(stream, list(events), expected_version=expected_version,
                                   idempotency_key=idempotency_key)
        return [(e.seq, e.position) for e in stored]

    async def read_stream(self, stream: str, *, from_seq: int = 1) -> list[StoredEvent]:
        return self.store.read_stream(stream, from_seq=from_seq)

    async def read_all(self, *, after_position: int = 0, limit: int | None = None,
                       types: Sequence[str] | None = None) -> list[StoredEvent]:
        return self.store.read_all(after_position=after_position, limit=limit,
                                   types=list(types) if types else None)


class MarketDesk:
    """Market data for many runs: one ``MarketData`` per distinct data configuration, its
    blocking vendor calls in threads. The market-data actor is a thin shell around this."""

    def __init__(self, cache_path: str | None = None, throttle: Any = None):
        self.cache_path, self.throttle = cache_path, throttle
        self._services: dict[tuple, Any] = {}
        self._lock = asyncio.Lock()

    async def _service(self, config: Any) -> Any:
        key = (tuple(sorted((k, tuple(v)) for k, v in config.vendors.items())),
               tuple(sorted((k, tuple(v)) for k, v in config.tool_vendors.items())),
               config.data_dir, config.max_stale_days)
        async with self._lock:
            if key not in self._services:
                from data.service import MarketData
                self._services[key] = await asyncio.to_thread(
                    MarketData, vendors=config.vendors, tool_vendors=config.tool_vendors,
                    data_dir=config.data_dir, cache_path=self.cache_path,
                    throttle=self.throttle, max_stale_days=config.max_stale_days)
            return self._services[key]

    async def call_tools(self, calls: list[tuple[str, dict]], trade_date: dt.date,
                         config: Any) -> list[ToolAnswer]:
        service = await self._service(config)

        def one(name: str, arguments: dict) -> ToolAnswer:
            started = time.perf_counter()
            try:
                result = service.call_tool(name, arguments, trade_date)
            except Exception as exc:  # noqa: BLE001 - DataError: no vendor answered at all
                return None, one_line(exc), (time.perf_counter() - started) * 1000
            return result, None, (time.perf_counter() - started) * 1000
        return list(await asyncio.gather(*(asyncio.to_thread(one, name, args)
                                           for name, args in calls)))

    async def identity(self, config: Any) -> Instrument:
        service = await self._service(config)
        return await asyncio.to_thread(service.identity, config.ticker)

    async def snapshot(self, config: Any) -> MarketSnapshot | None:
        service = await self._service(config)
        return await asyncio.to_thread(service.snapshot, config.ticker, config.trade_date)

    async def closes(self, config: Any, symbol: str, start: dt.date,
                     end: dt.date) -> list[tuple[dt.date, float]]:
        service = await self._service(config)
        return await asyncio.to_thread(service.closes, symbol, start, end)

    async def benchmark_for(self, config: Any) -> str:
        service = await self._service(config)
        return service.benchmark_for(config.ticker, config.benchmark)
