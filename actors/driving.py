"""The run driver: plain Python that drives runs from their projection (the coordinator's
logic, without Ray).

* **One owner per run.** A driver first claims the run with a ``RunDriven`` event appended
  at the run's expected version: of two claims on the same version exactly one lands, and
  every later append of the owner names the version it expects, so a second driver can
  never interleave. A claim held by a live owner is respected (followed, or reported as
  busy); a claim whose owner is gone (process died, node left, driver killed) is taken over.
* **The order is the projection's.** What happens next is ``next_step`` on the run's
  events, so a fresh run, a resumed one and one taken over continue the same way.
* **Turns play in the driver's process**, as asyncio tasks over the run's live handle:
  every append to the run passes through the handle, so its state is always the run's
  latest without reading the store again.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import structlog

from actors.outcomes import OutcomeScorer
from actors.ports import InfraError, LLMPort, MarketPort, StorePort
from actors.turns import RoleTurn, TurnFailed
from events import domain as d
from events.envelope import NewEvent
from events.errors import one_line
from events.records import Instrument
from events.roles import speaker_of
from events.store import ConcurrencyError
from projections.grounding import check_before
from projections.reports import render_reports
from projections.run_state import RunState, apply, project
from projections.schedule import Turn, next_step, refusal

ACTOR = "coordinator"
CLAIM_ATTEMPTS = 5
log = structlog.get_logger("actors.driving")

IsAlive = Callable[[str, str], Awaitable[bool]]


class Refused(Exception):
    """An event out of turn; the message says why."""


class LeaseLost(Exception):
    """Another driver appended to the run: this one stops without writing anything more."""


class RunHandle:
    """The live state of one run this driver owns; every append to the run goes through it,
    at the version it expects."""

    def __init__(self, store: StorePort, run_id: str, state: RunState):
        self.store, self.run_id, self.state = store, run_id, state
        self._lock = asyncio.Lock()

    async def _append_locked(self, events: list[NewEvent], key: str | None) -> None:
        try:
            appended = await self.store.append(self.run_id, events,
                                               expected_version=self.state.version,
                                               idempotency_key=key)
        except ConcurrencyError as exc:
            raise LeaseLost(f"{self.run_id}: another driver appended ({exc})") from None
        self.state = fold_appended(self.state, events, appended)

    async def append(self, payloads: list[d.DomainEvent], *, key: str | None,
                     actor: str = ACTOR, cause: str | None = None) -> None:
        events = [NewEvent(p, actor if i == 0 else ACTOR, cause) for i, p in enumerate(payloads)]
        async with self._lock:
            await self._append_locked(events, key)

    async def record(self, payload: d.DomainEvent, *, key: str, actor: str,
                     cause: str | None = None) -> None:
        await self.append([payload], key=key, actor=actor, cause=cause)

    async def record_all(self, payloads: Sequence[d.DomainEvent], *, key: str, actor: str,
                         cause: str | None = None) -> None:
        """Several records of one actor, in one append (e.g. the tool calls of one reply)."""
        async with self._lock:
            await self._append_locked([NewEvent(p, actor, cause) for p in payloads], key)

    async def submit(self, output: d.DomainEvent, *, actor: str,
                     calls: Sequence[d.LLMCallCompleted] = ()) -> None:
        """Append a role's output if it is in turn (raise Refused otherwise), together with
        the model call it came from (if not recorded yet) and the assignments it opens: one
        commit per turn."""
        turn_id = getattr(output, "turn_id", None)
        records = [NewEvent(c, actor, turn_id) for c in calls]
        async with self._lock:
            reason = refusal(self.state, output)
            if reason:
                log.warning("output_refused", run_id=self.run_id, type=output.type,
                            actor=actor, reason=reason)
                for call, record in zip(calls, records, strict=True):  # they were made:
                    await self._append_locked([record], f"{turn_id}:llm:{call.call_index}")
                raise Refused(f"{self.run_id}: refused {output.type} from {actor}: {reason}")
            key = f"{turn_id}:output" if turn_id else f"{output.type}:{self.state.version}"
            check = check_before(self.state, list(calls), output)  # the grounding audit
            audited = [NewEvent(check, actor, turn_id)] if check is not None else []
            opened = opened_by(apply(self.state, output))
            events = records + [NewEvent(output, actor, turn_id)] + audited + [
                NewEvent(p, ACTOR, turn_id) for p in opened]
            await self._append_locked(events, key)


class RunDriver:
    def __init__(self, *, store: StorePort, llm: LLMPort, market: MarketPort, owner: str,
                 node: str | None = None, is_alive: IsAlive | None = None,
                 follow_interval_s: float = 0.5):
        self.store, self.llm, self.market = store, llm, market
        self.owner, self.node = owner, node
        self._is_alive = is_alive
        self._follow_s = follow_interval_s
        self._tasks: dict[str, asyncio.Task] = {}
        self.outcomes = OutcomeScorer(store=store, llm=llm, market=market)

    def driving(self) -> list[str]:
        return [rid for rid, task in self._tasks.items() if not task.done()]

    async def alive(self, owner: str, run_id: str) -> bool:
        if owner == self.owner:
            return run_id in self.driving()
        return bool(self._is_alive and await self._is_alive(owner, run_id))

    async def drive(self, run_id: str, *, resume: d.RunResumed | None = None,
                    follow: bool = True) -> dict:
        """Drive ``run_id`` to its end and summarise it. If this driver is driving it
        already, wait for that; if a live driver elsewhere owns it, follow it (or, with
        ``follow=False``, say who owns it)."""
        task = self._tasks.get(run_id)
        if task is not None and not task.done() and not follow:
            return {"run_id": run_id, "status": "busy", "driver": self.owner, "rating": None,
                    "reason": f"being driven by {self.owner}"}
        if task is None or task.done():
            task = asyncio.ensure_future(self._drive(run_id, resume, follow))
            self._tasks[run_id] = task
            task.add_done_callback(lambda t, r=run_id: self._tasks.get(r) is t
                                   and self._tasks.pop(r, None))
        return await asyncio.shield(task)  # a cancelled caller does not stop the run

    async def _read(self, run_id: str, base: RunState | None = None) -> RunState:
        base = base or RunState()
        return project(await self.store.read_stream(run_id, from_seq=base.version + 1), base)

    async def _drive(self, run_id: str, resume: d.RunResumed | None, follow: bool) -> dict:
        state = await self._read(run_id)
        if state.config is None:
            raise ValueError(f"no run {run_id!r} in this store")
        for _ in range(CLAIM_ATTEMPTS):
            if state.status == "completed" or (state.finished and resume is None):
                return summary(run_id, state)
            owner = state.driver
            if owner and owner != self.owner and not state.finished \
                    and await self.alive(owner, run_id):
                if not follow:
                    return summary(run_id, state, status="busy")
                state = await self._follow(run_id, state)
                continue
            claim: list[d.DomainEvent] = [d.RunDriven(owner=self.owner, node=self.node)]
            claim += [resume] if resume is not None else []
            events = [NewEvent(p, ACTOR) for p in claim]
            try:
                appended = await self.store.append(
                    run_id, events, expected_version=state.version,
                    idempotency_key=f"claim:{self.owner}:{state.version}")
            except ConcurrencyError:
                state = await self._read(run_id, state)
                continue
            state = fold_appended(state, events, appended)
            log.info("run_claimed", run_id=run_id, owner=self.owner, version=state.version)
            return await self._run(RunHandle(self.store, run_id, state))
        raise InfraError("run lease", f"{run_id}: could not claim the run after "
                                      f"{CLAIM_ATTEMPTS} tries (others kept appending)")

    async def _follow(self, run_id: str, state: RunState) -> RunState:
        """Watch a run another live driver owns until it ends or its owner is gone."""
        owner, checked = state.driver, time.monotonic()
        while not state.finished:
            await asyncio.sleep(self._follow_s)
            state = await self._read(run_id, state)
            if state.driver != owner:
                return state  # someone claimed it meanwhile: decide again
            if time.monotonic() - checked > 5 * self._follow_s:
                checked = time.monotonic()
                if owner is None or not await self.alive(owner, run_id):
                    return state
        return state

    async def _run(self, run: RunHandle) -> dict:
        inflight: dict[str, asyncio.Task] = {}
        try:
            while True:
                step = next_step(run.state)
                if step.kind == "done":
                    break
                if step.kind == "prepare":
                    await self._prepare(run)
                elif step.kind == "complete":
                    await run.append([d.RunCompleted(rating=run.state.decision.rating)],
                                     key="complete")
                else:
                    await self._dispatch(run, step.turns, inflight)
        except LeaseLost as exc:
            log.warning("lease_lost", run_id=run.run_id, owner=self.owner, reason=str(exc))
        except Exception as exc:  # noqa: BLE001 - any failure ends the run with a reason
            await self._fail(run, exc)
        finally:  # a failed run stops its other turns too: no model is paid after the end
            for task in inflight.values():
                task.cancel()
        s = run.state
        log.info("run_left", run_id=run.run_id, status=s.status, rating=s.rating,
                 llm_calls=s.usage.llm_calls, tokens=s.usage.tokens)
        return summary(run.run_id, s)

    async def _fail(self, run: RunHandle, exc: Exception) -> None:
        kind = "infrastructure" if isinstance(exc, InfraError) else "error"
        failed = d.RunFailed(kind=kind, reason=one_line(exc))
        try:
            await run.append([failed], key=f"failed:{run.state.version}")
        except Exception as again:  # noqa: BLE001 - the store itself is down
            log.error("run_fail_unrecorded", run_id=run.run_id, reason=failed.reason,
                      error=one_line(again))  # the run stays incomplete: resume it

    async def _dispatch(self, run: RunHandle, turns: tuple[Turn, ...],
                        inflight: dict[str, asyncio.Task]) -> None:
        unassigned = [t for t in turns if t.turn_id not in run.state.assigned]
        if unassigned:  # normally assigned with the previous output; a fresh or resumed run
            await run.append(opened_by(run.state), key=f"assign:{unassigned[0].turn_id}")
        for turn in turns:
            if turn.turn_id not in inflight:
                inflight[turn.turn_id] = asyncio.ensure_future(self._play(run, turn))
        by_task = {task: tid for tid, task in inflight.items()}
        done, _ = await asyncio.wait(by_task, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            turn_id = by_task[task]
            del inflight[turn_id]
            output, calls = task.result()  # InfraError / LeaseLost propagate to _run
            if isinstance(output, d.RunFailed):
                if not run.state.finished:
                    await run.append([output], key=f"failed:{turn_id}:{run.state.version}",
                                     actor=f"role:{output.role}", cause=turn_id)
                return
            await run.submit(output, actor=f"role:{speaker_of(output)}", calls=calls)

    async def _play(self, run: RunHandle, turn: Turn
                    ) -> tuple[d.DomainEvent, list[d.LLMCallCompleted]]:
        """The turn's output and its final model call, not yet recorded (or a RunFailed)."""
        role_turn = RoleTurn(run, turn, self.llm, self.market)
        try:
            return await role_turn.run_turn(), role_turn.unrecorded
        except TurnFailed as exc:
            await role_turn._record_unrecorded()
            return d.RunFailed(kind=exc.kind, reason=str(exc), role=turn.role), []

    # ---- context before the analysts ----------------------------------------------------
    async def _prepare(self, run: RunHandle) -> None:
        """Identity, verified snapshot and past context, fetched together, recorded at once.
        A failure of the system (InfraError) is never recorded as a market fact."""
        state, c = run.state, run.state.config
        instrument, snapshot, past = await asyncio.gather(
            self._identity(c), self._snapshot(c), self.outcomes.past_context(c))
        events: list[d.DomainEvent] = []
        if state.instrument is None:
            events.append(d.InstrumentResolved(instrument=instrument))
        if not state.snapshot_taken:
            events.append(d.MarketSnapshotTaken(snapshot=snapshot[0], note=snapshot[1]))
        if state.past_context is None:
            events.append(d.PastContextLoaded(text=past[0], entries=past[1]))
        await run.append(events, key="context")

    async def _identity(self, c: Any) -> Instrument:
        try:
            return await self.market.identity(c)
        except InfraError:
            raise
        except Exception as exc:  # noqa: BLE001 - a vendor's answer: identity is fail-open
            return Instrument(ticker=c.ticker, symbol=c.ticker, available=False,
                              note=f"identity unavailable: {one_line(exc)}")

    async def _snapshot(self, c: Any) -> tuple[Any, str | None]:
        try:
            snapshot = await self.market.snapshot(c)
        except InfraError:
            raise
        except Exception as exc:  # noqa: BLE001 - a vendor's answer; roles won't quote it
            return None, one_line(exc)
        if snapshot is None:
            return None, f"no price data for {c.ticker} on or before {c.trade_date}"
        return snapshot, None


class _Folded(NamedTuple):
    seq: int
    payload: d.DomainEvent


def fold_appended(state: RunState, events: list[NewEvent],
                  appended: list[tuple[int, int]]) -> RunState:
    """The state after an append, from the payloads sent and the seqs the store gave them.
    A replayed key returns seqs the state already has: nothing changes. (A key names one
    request, so a replay stored exactly these payloads.)"""
    fresh = [_Folded(seq, e.payload) for (seq, _), e in zip(appended, events, strict=True)
             if seq > state.version]
    return project(fresh, state) if fresh else state


def opened_by(state: RunState) -> list[d.DomainEvent]:
    """Assignments (or the completion) that ``state`` makes due and that are not yet made."""
    step = next_step(state)
    if step.kind == "complete":
        return [d.RunCompleted(rating=state.decision.rating)]
    return [d.TurnAssigned(turn_id=t.turn_id, role=t.role, round=t.round)
            for t in step.turns if t.turn_id not in state.assigned]


def summary(run_id: str, state: RunState, status: str | None = None) -> dict:
    """What the command that asked for the run needs to report it: a finished run comes
    with its figures and its rendered reports, so nobody reads its stream again for them."""
    out: dict[str, Any] = {
        "run_id": run_id, "ticker": state.ticker, "status": status or state.status,
        "rating": state.rating, "driver": state.driver,
        "reason": state.failure.reason if state.failure else None}
    if state.finished and status is None:
        u = state.usage
        out |= {"trade_date": str(state.config.trade_date), "decided": state.decision is not None,
                "llm_calls": u.llm_calls, "tool_calls": u.tool_calls, "tokens": u.tokens,
                "cost_usd": round(u.cost_usd, 6), "reports": render_reports(state)}
    return out
