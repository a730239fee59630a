"""The coordinator: drives every run in flight from its projection.

It alone appends turn assignments and turn outputs, and only after checking them against the
projection (``projections.schedule``): wrong speaker, a second report, a round too many or
anything after the run ended is refused. What it does next is decided by ``next_step`` on
the events alone, so a resumed run continues exactly where its events end.
"""
from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import ray
import structlog

from events import domain as d
from events.envelope import NewEvent
from events.records import Instrument
from projections.memory import (MEMORY_STREAM, MEMORY_TYPES, MemoryEntry, memory_entries,
                                past_context, pending_for)
from projections.run_state import RunState, apply, project
from projections.schedule import Turn, next_step, refusal

ACTOR = "coordinator"
log = structlog.get_logger("actors.coordinator")


class Refused(Exception):
    """An event out of turn; the message says why."""


@ray.remote(num_cpus=0, max_concurrency=1000)
class Coordinator:
    def __init__(self, role_names: dict[str, str], gateway: Any, market: Any):
        from actors.logs import configure
        configure()
        self.role_names, self.gateway, self.market = role_names, gateway, market
        self._roles: dict[str, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._states: dict[tuple, RunState] = {}

    def role(self, role: str) -> Any:
        """The role's actor, looked up by name (role actors start after the coordinator)."""
        if role not in self._roles:
            self._roles[role] = ray.get_actor(self.role_names[role],
                                              namespace=ray.get_runtime_context().namespace)
        return self._roles[role]

    # ---- state and appending, with the turn check -----------------------------------------
    async def _state(self, store: Any, run_id: str) -> RunState:
        """The run's projection, kept per run and refreshed with only the events it lacks."""
        key = (getattr(store, "path", id(store)), run_id)
        base = self._states.get(key) or RunState()
        state = project(await store.read_stream.remote(run_id, base.version + 1), base)
        if state.finished:
            self._states.pop(key, None)
        elif state.version > getattr(self._states.get(key), "version", 0):
            self._states[key] = state  # concurrent refreshes never move it backwards
        return state

    async def _append(self, store: Any, run_id: str, payloads: list[d.DomainEvent], key: str,
                      actor: str = ACTOR, cause: str | None = None) -> None:
        await store.append.remote(run_id, [NewEvent(p, actor if i == 0 else ACTOR, cause)
                                           for i, p in enumerate(payloads)], None, key)

    async def submit(self, store: Any, run_id: str, payload: d.DomainEvent,
                     actor: str = ACTOR) -> RunState:
        """Append a role's output if it is in turn (raise Refused otherwise), together with
        the assignments it opens: one commit per turn instead of two."""
        lock = self._locks.setdefault(run_id, asyncio.Lock())
        async with lock:
            state = await self._state(store, run_id)
            reason = refusal(state, payload)
            if reason:
                log.warning("output_refused", run_id=run_id, type=payload.type, actor=actor,
                            reason=reason)
                raise Refused(f"{run_id}: refused {payload.type} from {actor}: {reason}")
            turn_id = getattr(payload, "turn_id", None)
            key = f"{turn_id}:output" if turn_id else f"{payload.type}:{state.version}"
            await self._append(store, run_id, [payload, *_opened(apply(state, payload))], key,
                               actor, turn_id)
            return await self._state(store, run_id)

    # ---- driving a run -------------------------------------------------------------------
    async def drive(self, store: Any, run_id: str) -> dict:
        state = await self._state(store, run_id)
        if state.config is None:
            raise ValueError(f"no run {run_id!r} in this store")
        inflight: dict[str, tuple[Any, asyncio.Future]] = {}
        log.info("run_driven", run_id=run_id, ticker=state.ticker, status=state.status,
                 version=state.version)
        try:
            while True:
                step = next_step(state)
                if step.kind == "done":
                    break
                if step.kind == "prepare":
                    await self._prepare(store, run_id, state)
                elif step.kind == "complete":
                    await self._append(store, run_id, [d.RunCompleted(rating=state.decision.rating)],
                                       "complete")
                else:
                    await self._dispatch(store, run_id, state, step.turns, inflight)
                state = await self._state(store, run_id)
        except Exception as exc:  # noqa: BLE001 - any failure ends the run with a reason
            reason = _first_line(exc)
            await self._append(store, run_id, [d.RunFailed(kind="error", reason=reason)],
                               f"failed:{state.version}")
            state = await self._state(store, run_id)
        finally:  # a failed run stops its other turns too: no model is paid after the end
            for ref, task in inflight.values():
                ray.cancel(ref)
                task.cancel()
        log.info("run_left", run_id=run_id, status=state.status, rating=state.rating,
                 llm_calls=state.usage.llm_calls, tokens=state.usage.tokens,
                 reason=state.failure.reason if state.failure else None)
        return {"run_id": run_id, "ticker": state.ticker, "status": state.status,
                "rating": state.rating,
                "reason": state.failure.reason if state.failure else None}

    async def _dispatch(self, store: Any, run_id: str, state: RunState, turns: tuple[Turn, ...],
                        inflight: dict[str, tuple[Any, asyncio.Future]]) -> None:
        unassigned = [t for t in turns if t.turn_id not in state.assigned]
        if unassigned:  # normally assigned with the previous output; a fresh or resumed run
            await self._append(store, run_id, _opened(state), f"assign:{unassigned[0].turn_id}")
        for turn in turns:
            if turn.turn_id not in inflight:
                ref = self.role(turn.role).act.remote(store, run_id, turn)
                inflight[turn.turn_id] = (ref, asyncio.ensure_future(ref))
        by_task = {task: tid for tid, (_, task) in inflight.items()}
        done, _ = await asyncio.wait(by_task, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            turn_id = by_task[task]
            del inflight[turn_id]
            output = task.result()
            if isinstance(output, d.RunFailed):
                if not (await self._state(store, run_id)).finished:
                    await self._append(store, run_id, [output],
                                       f"failed:{turn_id}:{state.version}",
                                       f"role:{output.role}", turn_id)
                return
            await self.submit(store, run_id, output, actor=f"role:{output_role(output)}")

    # ---- context before the analysts ----------------------------------------------------
    async def _prepare(self, store: Any, run_id: str, state: RunState) -> None:
        """Identity, verified snapshot and past context, fetched together, recorded at once."""
        c = state.config
        instrument, snapshot, past = await asyncio.gather(
            self._identity(c), self._snapshot(c), self._past(store, c))
        events = []
        if state.instrument is None:
            events.append(d.InstrumentResolved(instrument=instrument))
        if not state.snapshot_taken:
            events.append(d.MarketSnapshotTaken(snapshot=snapshot[0], note=snapshot[1]))
        if state.past_context is None:
            events.append(d.PastContextLoaded(text=past[0], entries=past[1]))
        await self._append(store, run_id, events, "context")

    async def _identity(self, c: Any) -> Instrument:
        try:
            return await self.market.identity.remote(c)
        except Exception as exc:  # noqa: BLE001 - identity is fail-open
            return Instrument(ticker=c.ticker, symbol=c.ticker, available=False,
                              note=f"identity unavailable: {_first_line(exc)}")

    async def _snapshot(self, c: Any) -> tuple[Any, str | None]:
        try:
            snapshot = await self.market.snapshot.remote(c)
        except Exception as exc:  # noqa: BLE001 - recorded; roles are told not to quote
            return None, _first_line(exc)
        if snapshot is None:
            return None, f"no price data for {c.ticker} on or before {c.trade_date}"
        return snapshot, None

    async def _past(self, store: Any, c: Any) -> tuple[str, int]:
        await self.resolve_outcomes(store, c, c.ticker)
        entries = memory_entries(await store.read_all.remote(0, None, list(MEMORY_TYPES)))
        return past_context(entries, c.ticker, c.trade_date)

    # ---- memory: scoring past decisions -------------------------------------------------
    async def resolve_outcomes(self, store: Any, config: Any, ticker: str | None = None,
                               today: dt.date | None = None) -> int:
        """Score pending decisions (of ``ticker``, or all) whose holding period has data."""
        today = today or dt.date.today()
        entries = memory_entries(await store.read_all.remote(0, None, list(MEMORY_TYPES)))
        pending = (pending_for(entries, ticker, config.trade_date) if ticker
                   else [m for m in entries if not m.resolved])
        resolved = 0
        for entry in pending:
            outcome = await self._outcome(config, entry, today)
            if outcome is None:
                continue
            prompt = {"ticker": entry.ticker, "trade_date": str(entry.trade_date),
                      "decision": entry.decision, "raw": outcome.raw_return,
                      "alpha": outcome.alpha, "benchmark": outcome.benchmark,
                      "days": outcome.holding_days}
            call = await self.role("reflector").reflect.remote(
                store, config, {"run_id": entry.run_id, "prompt": prompt})
            reflection = d.ReflectionRecorded(run_id=entry.run_id, ticker=entry.ticker,
                                              trade_date=entry.trade_date,
                                              reflection=call.response_text.strip(),
                                              model=call.model)
            events = [NewEvent(outcome, ACTOR), NewEvent(call, "role:reflector"),
                      NewEvent(reflection, "role:reflector")]
            await store.append.remote(MEMORY_STREAM, events, None, f"outcome:{entry.run_id}")
            resolved += 1
        return resolved

    async def _outcome(self, config: Any, m: MemoryEntry, today: dt.date
                       ) -> d.OutcomeResolved | None:
        holding = config.holding_days
        window_end = m.trade_date + dt.timedelta(days=holding * 7 // 5 + 5)
        cfg = config.model_copy(update={"ticker": m.ticker, "trade_date": m.trade_date})
        try:
            closes = await self.market.closes.remote(cfg, m.ticker, m.trade_date, window_end)
            benchmark = await self.market.benchmark_for.remote(cfg)
            bench = await self.market.closes.remote(cfg, benchmark, m.trade_date, window_end)
        except Exception:  # noqa: BLE001 - stays pending; tried again next time
            return None
        closes = [(day, c) for day, c in closes if day >= m.trade_date]
        complete = len(closes) > holding or window_end < today
        if len(closes) < 2 or not complete or not bench:
            return None
        k = min(holding, len(closes) - 1)
        (d0, c0), (dk, ck) = closes[0], closes[k]
        b0, bk = _close_on(bench, d0), _close_on(bench, dk)
        if b0 is None or bk is None:
            return None
        raw, bench_raw = ck / c0 - 1, bk / b0 - 1
        return d.OutcomeResolved(run_id=m.run_id, ticker=m.ticker, trade_date=m.trade_date,
                                 rating=m.rating, raw_return=raw, benchmark=benchmark,
                                 benchmark_return=bench_raw, alpha=raw - bench_raw,
                                 holding_days=k, resolved_on=dk)


def _opened(state: RunState) -> list[d.DomainEvent]:
    """Assignments (or the completion) that ``state`` makes due and that are not yet made."""
    step = next_step(state)
    if step.kind == "complete":
        return [d.RunCompleted(rating=state.decision.rating)]
    return [d.TurnAssigned(turn_id=t.turn_id, role=t.role, round=t.round)
            for t in step.turns if t.turn_id not in state.assigned]


def _close_on(series: list[tuple[dt.date, float]], day: dt.date) -> float | None:
    """Close on ``day``, or the last one before it (benchmarks trade on other holidays)."""
    before = [c for dd, c in series if dd <= day]
    return before[-1] if before else None


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "cause", None) or exc)
    return text.splitlines()[0] if text else type(exc).__name__


def output_role(output: d.DomainEvent) -> str:
    return (getattr(output, "analyst", None) or getattr(output, "speaker", None)
            or {"InvestmentPlanIssued": "research_manager", "TradeProposed": "trader",
                "PortfolioDecisionIssued": "portfolio_manager"}.get(output.type, "unknown"))
