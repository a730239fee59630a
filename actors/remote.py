"""Ray adapters for the ports: calls to named actors that survive the actor's death.

A call that fails because its actor died (or is restarting, or its node left) is retried
against the actor resolved again by name — restarted in place by Ray, or created again —
until ``patience_s`` runs out; then it raises ``InfraError`` naming the actor. An error the
actor *raised* (a vendor said no, a model call failed, a store conflict) is passed through
unwrapped: it is an answer, not a fault.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import ray
import structlog
from ray import exceptions as rex

from actors import pools
from actors.ports import InfraError
from events.envelope import NewEvent, StoredEvent
from events.errors import one_line

log = structlog.get_logger("actors.remote")

#: Failures of the system, not answers of the actor: retried once the actor is back.
TRANSIENT = (rex.RayActorError, rex.ActorUnschedulableError, rex.WorkerCrashedError,
             rex.ObjectLostError, rex.OwnerDiedError, rex.NodeDiedError,
             rex.LocalRayletDiedError)
PATIENCE_S = 90.0


class ActorCaller:
    """Calls to one named actor; ``ensure`` resolves (or recreates) it."""

    def __init__(self, name: str, ensure: Callable[[], Any] | None = None,
                 patience_s: float = PATIENCE_S):
        self.name, self._ensure, self.patience_s = name, ensure, patience_s
        self._handle: Any = None
        self.retries = 0

    def _resolve(self) -> Any:
        if self._handle is None:
            self._handle = self._ensure() if self._ensure else pools.lookup(self.name)
            if self._handle is None:
                raise ValueError(f"no actor named {self.name}")
        return self._handle

    async def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        deadline, delay = time.monotonic() + self.patience_s, 0.1
        while True:
            try:
                return await getattr(self._resolve(), method).remote(*args, **kwargs)
            except rex.RayTaskError as exc:  # the actor raised: an answer, pass it on
                cause = exc.cause if isinstance(exc.cause, BaseException) else None
                if isinstance(cause, TRANSIENT):  # it failed calling a dead actor itself
                    error: BaseException = cause
                else:
                    raise (cause or exc) from None
            except (*TRANSIENT, ValueError) as exc:
                error = exc
            self._handle = None
            self.retries += 1
            if time.monotonic() > deadline:
                raise InfraError(f"actor {self.name}", one_line(error)) from None
            log.warning("actor_call_retry", actor=self.name, method=method,
                        error=one_line(error))
            await asyncio.sleep(delay)
            delay = min(2.0, delay * 2)


def _error(outcome: tuple) -> Exception:
    """An append's error, rebuilt from the plain data the store actor sent."""
    from events.store import ConcurrencyError, StoreError
    if outcome[0] == "conflict":
        return ConcurrencyError(*outcome[1:])
    return StoreError(f"{outcome[1]}: {outcome[2]}")


class RemoteStore:
    """StorePort: one file of the event-store actor. Appends carry idempotency keys (or an
    expected version), so a call retried after the actor restarted cannot write twice.

    Appends are group-committed on this side too: while one call to the store is in flight,
    the appends of every run in this worker queue up and go together in the next call, so
    a busy worker makes a few store calls, not one per event (a Ray call costs the single
    store process more than the append itself)."""

    def __init__(self, path: str):
        self.path = path
        self._call = ActorCaller(pools.STORE)
        self._pending: list[tuple[tuple, asyncio.Future]] = []
        self._sender: asyncio.Task | None = None

    async def append(self, stream: str, events: Sequence[NewEvent], *,
                     expected_version: int | None = None,
                     idempotency_key: str | None = None) -> list[tuple[int, int]]:
        future = asyncio.get_running_loop().create_future()
        self._pending.append(((stream, list(events), expected_version, idempotency_key),
                              future))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._send())
        return await future

    async def _send(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                outcomes = await self._call("append_batch", self.path, [r for r, _ in batch])
            except BaseException as exc:  # noqa: BLE001 - every waiter learns it
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if isinstance(outcome, list):
                    future.set_result(outcome)
                else:
                    future.set_exception(_error(outcome))

    async def read_stream(self, stream: str, *, from_seq: int = 1) -> list[StoredEvent]:
        return await self._call("read_stream", self.path, stream, from_seq)

    async def read_all(self, *, after_position: int = 0, limit: int | None = None,
                       types: Sequence[str] | None = None) -> list[StoredEvent]:
        return await self._call("read_all", self.path, after_position, limit,
                                list(types) if types else None)

    async def query(self, name: str, params: dict) -> list[dict]:
        return await self._call("query", self.path, name, params)


class RemoteLLM:
    """LLMPort: the cluster's one gateway (global provider and endpoint limits)."""

    def __init__(self) -> None:
        self._call = ActorCaller(pools.GATEWAY, pools.ensure_gateway)

    async def complete(self, request: Any) -> Any:
        return await self._call("complete", request)

    async def profile(self, model: str, base_url: str | None = None, *,
                      context_window: int | None = None,
                      concurrency: int | None = None) -> Any:
        return await self._call("profile", model, base_url, context_window=context_window,
                                concurrency=concurrency)

    async def streams(self) -> list[dict]:
        return await self._call("streams")


class RemoteMarket:
    """MarketPort: the market-data replica paired with this worker."""

    def __init__(self, index: int, node_id: str | None = None):
        self._call = ActorCaller(pools.market_name(index),
                                 lambda: pools.ensure_market(index, node_id))

    async def identity(self, config: Any) -> Any:
        return await self._call("identity", config)

    async def snapshot(self, config: Any) -> Any:
        return await self._call("snapshot", config)

    async def call_tools(self, calls: list, trade_date: Any, config: Any) -> list:
        return await self._call("call_tools", calls, trade_date, config)

    async def closes(self, config: Any, symbol: str, start: Any, end: Any) -> list:
        return await self._call("closes", config, symbol, start, end)

    async def benchmark_for(self, config: Any) -> str:
        return await self._call("benchmark_for", config)


async def owner_alive(owner: str, run_id: str, timeout_s: float = 10.0) -> bool:
    """Whether the driver ``owner`` ("worker-3/1f0c…") is alive and still driving ``run_id``:
    the named replica must answer with the same incarnation and list the run."""
    name, _, incarnation = owner.partition("/")
    handle = pools.lookup(name)
    if handle is None:
        return False
    try:
        current, runs = await asyncio.wait_for(handle.driving.remote(), timeout_s)
    except (asyncio.TimeoutError, ray.exceptions.RayError):
        return False
    return current == incarnation and run_id in runs
