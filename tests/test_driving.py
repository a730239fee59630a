"""The run driver as plain Python, on the in-memory store: no Ray, milliseconds per run.

The real offline model (through the real gateway) and the real market-data desk on the
synthetic vendor; only faults are injected, by wrapping our ports the way a dying actor or a
failing provider would behave at their edge."""
from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter

import pytest

from actors.driving import Refused, RunDriver, RunHandle
from actors.ports import InfraError, LocalStore, MarketDesk
from events import domain as d
from events.config import RunConfig
from events.envelope import NewEvent
from events.memory_store import InMemoryEventStore
from events.roles import OUTPUT_OF_ROLE
from projections.run_state import project
from providers.base import LLMError
from providers.gateway import LLMGateway

SYNTHETIC = {k: ("synthetic",) for k in ("prices", "indicators", "fundamentals", "news",
                                         "social", "identity")}


class CountingLLM:
    """The real gateway, counting the calls it answers (and failing a role on request)."""

    def __init__(self, fail_role: str | None = None, latency_s: float = 0.0):
        self.gateway, self.fail_role, self.latency_s = LLMGateway(), fail_role, latency_s
        self.calls: Counter[str] = Counter()

    async def complete(self, request):
        if request.role == self.fail_role:
            raise LLMError("provider said 500 on every attempt", kind="server")
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        reply = await self.gateway.complete(request)
        self.calls[request.role] += 1
        return reply


class FlakyMarket(MarketDesk):
    """The real desk, whose actor is 'dead' for the first ``down`` identity calls."""

    def __init__(self, down: int):
        super().__init__(None)
        self.down = down

    async def identity(self, config):
        if self.down > 0:
            self.down -= 1
            raise InfraError("actor market-data-0", "The actor died unexpectedly")
        return await super().identity(config)


def _request(store: InMemoryEventStore, run_id: str, ticker: str = "NVDA", **config) -> None:
    cfg = RunConfig(ticker=ticker, trade_date=dt.date(2024, 5, 10), vendors=SYNTHETIC, **config)
    store.append(run_id, [NewEvent(d.RunRequested(run_id=run_id, config=cfg), "test")],
                 expected_version=0)


def _driver(store, owner="w-0/a", llm=None, market=None, is_alive=None):
    return RunDriver(store=LocalStore(store), llm=llm or CountingLLM(),
                     market=market or MarketDesk(None), owner=owner, is_alive=is_alive,
                     follow_interval_s=0.02)


def _types(store, run_id):
    return [e.type for e in store.read_stream(run_id)]


def test_a_run_completes_with_exactly_one_output_per_turn():
    store = InMemoryEventStore()
    _request(store, "r1")
    summary = asyncio.run(_driver(store).drive("r1"))
    assert summary["status"] == "completed" and summary["rating"] is not None
    events = store.read_stream("r1")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[1].type == "RunDriven" and events[1].payload.owner == "w-0/a"
    assigned = [e.payload.turn_id for e in events if e.type == "TurnAssigned"]
    outputs = [e.payload.turn_id for e in events if e.type in set(OUTPUT_OF_ROLE.values())]
    assert sorted(assigned) == sorted(outputs) and len(outputs) == len(set(outputs)) == 12


def test_an_output_out_of_turn_is_refused_and_nothing_is_written():
    store = InMemoryEventStore()
    _request(store, "r1")
    asyncio.run(_driver(store).drive("r1"))
    before = len(store.read_stream("r1"))
    handle = RunHandle(LocalStore(store), "r1", project(store.read_stream("r1")))
    late = d.DebateArgumentMade(turn_id="debate:3", speaker="bull", round=2, argument="late")
    with pytest.raises(Refused, match="completed"):
        asyncio.run(handle.submit(late, actor="role:bull"))
    assert len(store.read_stream("r1")) == before


def test_a_crashed_driver_is_taken_over_without_repeating_a_recorded_call():
    store = InMemoryEventStore()
    _request(store, "r1")
    first_llm = CountingLLM(latency_s=0.01)

    async def crash_after_plan():
        first = _driver(store, "w-0/old", llm=first_llm)
        task = asyncio.ensure_future(first.drive("r1"))
        while "InvestmentPlanIssued" not in _types(store, "r1"):
            await asyncio.sleep(0.005)
        task.cancel()  # the shielded run goes on: stop it the way a dying process would
        for t in list(first._tasks.values()):
            t.cancel()
        await asyncio.sleep(0.05)

    asyncio.run(crash_after_plan())
    crashed = store.read_stream("r1")
    assert project(crashed).status == "running" and project(crashed).decision is None
    recorded = {(e.payload.turn_id, e.payload.call_index) for e in crashed
                if e.type == "LLMCallCompleted"}
    second_llm = CountingLLM()
    dead = _driver(store, "w-0/new", llm=second_llm, is_alive=lambda o, r: _false())
    summary = asyncio.run(dead.drive("r1", resume=d.RunResumed(reason="test")))
    assert summary["status"] == "completed"
    events = store.read_stream("r1")
    llm = [(e.payload.turn_id, e.payload.call_index) for e in events
           if e.type == "LLMCallCompleted"]
    assert len(llm) == len(set(llm))  # no call recorded twice
    assert sum(second_llm.calls.values()) == len(set(llm) - recorded)  # none made twice
    assert [e.payload.owner for e in events if e.type == "RunDriven"] == ["w-0/old", "w-0/new"]


async def _false() -> bool:
    return False


def test_a_second_driver_follows_a_live_owner_and_never_writes():
    store = InMemoryEventStore()
    _request(store, "r1")

    async def both():
        a = _driver(store, "w-0/a", llm=CountingLLM(latency_s=0.01))

        async def a_alive(owner, run_id):
            return owner == a.owner and run_id in a.driving()

        b = _driver(store, "w-1/b", is_alive=a_alive)
        first = asyncio.ensure_future(a.drive("r1"))
        while "RunDriven" not in _types(store, "r1"):
            await asyncio.sleep(0.002)
        busy = await b.drive("r1", resume=d.RunResumed(reason="second"), follow=False)
        followed = await b.drive("r1", resume=d.RunResumed(reason="second"))
        return busy, followed, await first

    busy, followed, first = asyncio.run(both())
    assert busy["status"] == "busy" and busy["driver"] == "w-0/a"
    assert first["status"] == followed["status"] == "completed"
    types = Counter(_types(store, "r1"))
    assert types["RunDriven"] == 1 and types["RunResumed"] == 0 and types["RunFailed"] == 0


def test_a_dead_actor_is_never_recorded_as_missing_market_data():
    store = InMemoryEventStore()
    _request(store, "crash")
    failed = asyncio.run(_driver(store, market=FlakyMarket(down=1)).drive("crash"))
    assert failed["status"] == "failed" and "market-data-0" in failed["reason"]
    events = store.read_stream("crash")
    assert events[-1].payload.kind == "infrastructure"
    assert not {"InstrumentResolved", "MarketSnapshotTaken"} & set(_types(store, "crash"))
    resumed = asyncio.run(_driver(store, "w-0/b").drive(
        "crash", resume=d.RunResumed(reason="actor back")))
    _request(store, "clean")
    clean = asyncio.run(_driver(store, "w-0/c").drive("clean"))
    assert resumed["status"] == "completed" and resumed["rating"] == clean["rating"]
    resolved = project(store.read_stream("crash")).instrument
    assert resolved is not None and resolved.available


def test_a_provider_failing_one_role_fails_that_run_only():
    store = InMemoryEventStore()
    _request(store, "bad", ticker="NVDA")
    _request(store, "good", ticker="AAPL")
    broken = _driver(store, llm=CountingLLM(fail_role="bear"))
    healthy = _driver(store, "w-1/b")

    async def together():
        return await asyncio.gather(broken.drive("bad"), healthy.drive("good"))

    bad, good = asyncio.run(together())
    assert good["status"] == "completed"
    failure = project(store.read_stream("bad")).failure
    assert bad["status"] == "failed" and failure.role == "bear" and failure.kind == "llm"
    assert "500" in failure.reason


def test_a_driver_that_lost_its_lease_stops_without_writing():
    store = InMemoryEventStore()
    _request(store, "r1")

    async def steal():
        a = _driver(store, "w-0/a", llm=CountingLLM(latency_s=0.01))
        task = asyncio.ensure_future(a.drive("r1"))
        while "AnalystReportSubmitted" not in _types(store, "r1"):
            await asyncio.sleep(0.002)
        store.append("r1", [NewEvent(d.RunDriven(owner="w-9/thief"), "test")])
        return await task

    summary = asyncio.run(steal())
    assert summary["status"] == "running"
    types = _types(store, "r1")
    assert types[-1] == "RunDriven"  # nothing of the old owner after the new claim
    assert "RunFailed" not in types and "RunCompleted" not in types
