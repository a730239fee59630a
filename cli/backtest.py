"""Backtests as streams of their own: `run --to` starts one, `resume BACKTEST_ID` finishes it
without redoing completed runs, `replay` and `report` read it.

The backtest stream records the plan (BacktestRequested), each run before the run itself
exists (BacktestRunStarted) and, once every run has ended and the outcomes are scored, the
scorecard (BacktestCompleted). Dates go one after another (tickers in parallel), so later
decisions learn from the resolved outcomes of earlier ones.
"""
from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from cli import display
from cli.common import fail
from events import domain as d
from events.backtest import BEARISH_CHOICES, Bearish, TickerScore
from events.config import InvalidInput, RunConfig
from events.envelope import NewEvent
from projections.backtest import (BACKTEST_PREFIX, BacktestState, DecisionOutcome, RunFacts,
                                  decision_outcomes, project_backtest, run_facts)
from projections.backtest_report import pct, render_backtest, share
from projections.scorecard import scorecard

ENDED = ("completed", "failed")
CHART, REPORT = "backtest.png", "backtest.md"


def check_bearish(value: str) -> Bearish:
    if value not in BEARISH_CHOICES:
        raise InvalidInput(f"--bearish must be one of {', '.join(BEARISH_CHOICES)}, not "
                           f"{value!r}")
    return value  # type: ignore[return-value]


def new_backtest_id(first: dt.date) -> str:
    return f"{BACKTEST_PREFIX}{first}-{uuid.uuid4().hex[:8]}"


def start_backtest(*, store: Path, address: str | None, configs: list[RunConfig],
                   dates: list[dt.date], bearish: Bearish, max_runs: int | None,
                   out: Path | None, as_json: bool, workers: int | None) -> None:
    """Record the plan, then drive it (the same code path as a resume)."""
    from actors.session import Session
    backtest_id = new_backtest_id(dates[0])
    request = d.BacktestRequested(backtest_id=backtest_id, dates=dates, bearish=bearish,
                                  configs=[c.model_copy(update={"trade_date": dates[0]})
                                           for c in configs])
    with Session(store, address, workers) as session:
        session.append(backtest_id, [NewEvent(request, "cli")], expected_version=0,
                       idempotency_key=f"request:{backtest_id}")
        result = _drive(session, backtest_id, store, out, as_json, max_runs)
    _finish(result, as_json)


def resume_backtest(backtest_id: str, *, store: Path, address: str | None, out: Path | None,
                    as_json: bool) -> None:
    """Finish an interrupted backtest: completed runs stay as they are, unfinished ones are
    resumed, runs never started are started."""
    from actors.session import Session
    _verified_backtest(store, address, backtest_id)
    with Session(store, address) as session:
        result = _drive(session, backtest_id, store, out, as_json, None)
    _finish(result, as_json)


def _verified_backtest(store: Path, address: str | None, backtest_id: str) -> BacktestState:
    from cli.stores import open_reader
    reader = open_reader(store, address)
    try:
        check = reader.verify(backtest_id)
        if not check.ok:
            fail(f"backtest {backtest_id} fails its hash chain ({check.problem}); refusing to "
                 "continue it (see `ta-actors verify`)", code=1)
        return _state(reader.read_stream(backtest_id), backtest_id, store)
    finally:
        reader.close()


def _state(events: list, backtest_id: str, store: Path) -> BacktestState:
    state = project_backtest(events, backtest_id)
    if state.request is None:
        raise InvalidInput(f"no backtest {backtest_id!r} in {store}")
    return state


@dataclass
class Result:
    backtest_id: str
    status: str  # completed | incomplete
    rows: list[dict] = field(default_factory=list)
    decisions: list[DecisionOutcome] = field(default_factory=list)
    scores: list[TickerScore] = field(default_factory=list)
    folder: Path | None = None
    note: str | None = None


def _drive(session: Any, backtest_id: str, store: Path, out: Path | None, as_json: bool,
           max_runs: int | None) -> Result:
    state = _state(session.read_stream(backtest_id), backtest_id, store)
    folder = _folder(store, out, backtest_id)
    if state.completed is not None:
        display.err.print(f"backtest {backtest_id} already completed", markup=False)
        return _result(session.read_stream, session.query, state, folder, "completed")
    request = state.request
    assert request is not None
    facts = {rid: run_facts(session.read_stream(rid)) for rid in state.started.values()}
    progress = Progress(backtest_id, len(state.plan),  # failed runs are resumed: not done
                        sum(f.status == "completed" for f in facts.values()), quiet=as_json)
    budget, stopped = max_runs, False
    tickers = [c.ticker for c in request.configs]
    try:
        with progress:
            for i, day in enumerate(request.dates):
                if i:
                    session.grow()  # nodes that joined since the last date get replicas
                new = [t for t in tickers if (t, day) not in state.started]
                if budget is not None:
                    new, stopped = new[:budget], len(new) > budget
                    budget -= len(new)
                state = _start(session, state, day, new)
                _run_date(session, state, day, tickers, facts, progress, store, out)
                progress.date_done(i + 1, len(request.dates), day)
                if stopped:
                    break
    except KeyboardInterrupt:
        display.err.print(f"interrupted; the events so far are kept. Finish the backtest "
                          f"with: ta-actors resume {backtest_id} --store {store}", markup=False)
        raise typer.Exit(130) from None
    state = _state(session.read_stream(backtest_id), backtest_id, store)
    if len(state.started) < len(state.plan) or any(f.status not in ENDED
                                                   for f in facts.values()):
        note = (f"stopped after --max-runs {max_runs} new runs" if stopped else
                "some runs did not finish") + (f"; finish with: ta-actors resume {backtest_id}"
                                               f" --store {store}")
        return _result(session.read_stream, session.query, state, folder, "incomplete", note)
    session.resolve_outcomes(state.config_for(tickers[0], request.dates[0]))
    result = _result(session.read_stream, session.query, state, folder, "completed")
    completed = d.BacktestCompleted(
        runs=len(result.decisions), resolved=sum(x.alpha is not None for x in result.decisions),
        completed=sum(x.status == "completed" for x in result.decisions), scorecard=result.scores)
    session.append(backtest_id, [NewEvent(completed, "cli")],
                   idempotency_key=f"completed:{backtest_id}")
    return result


def _start(session: Any, state: BacktestState, day: dt.date, tickers: list[str]
           ) -> BacktestState:
    """Record the runs in the backtest stream first, then request them: a crash in between
    leaves a started run with no events, which the next resume requests."""
    from cli.options import new_run_id
    if not tickers:
        return state
    configs = [state.config_for(t, day) for t in tickers]
    ids = [new_run_id(c) for c in configs]
    version = len(session.read_stream(state.backtest_id))
    session.append(state.backtest_id, [
        NewEvent(d.BacktestRunStarted(run_id=rid, ticker=c.ticker, trade_date=day), "cli")
        for rid, c in zip(ids, configs)], expected_version=version)
    started = dict(state.started) | {(c.ticker, day): rid for rid, c in zip(ids, configs)}
    return BacktestState(state.backtest_id, state.request, started, state.completed)


def _run_date(session: Any, state: BacktestState, day: dt.date, tickers: list[str],
              facts: dict[str, RunFacts], progress: Progress, store: Path,
              out: Path | None) -> None:
    from cli.running import _reports_dir, write_files
    ids = [state.started[(t, day)] for t in tickers if (t, day) in state.started]
    todo = [rid for rid in ids if facts.get(rid, RunFacts("new", None, None)).status
            != "completed"]
    streams = {rid: session.read_stream(rid) for rid in todo}
    fresh = [rid for rid in todo if not streams[rid]]
    again = [rid for rid in todo if streams[rid]]
    session.append_many([(rid, [NewEvent(d.RunRequested(
        run_id=rid, config=state.config_for(t, day)), "cli")], f"request:{rid}")
        for (t, dd), rid in state.started.items() if dd == day and rid in fresh])
    progress.watch(todo, session, session.read_stream(state.backtest_id)[-1].position)
    summaries: dict[str, dict] = {}
    if again:
        summaries |= session.drive(again, resume=d.RunResumed(reason="backtest resumed"),
                                   on_tick=progress.tick)
    if fresh:
        summaries |= session.drive(fresh, on_tick=progress.tick)
    for rid in todo:
        if "reports" in summaries.get(rid, {}):
            write_files(_reports_dir(store, out, rid), summaries[rid]["reports"])
        facts[rid] = run_facts(session.read_stream(rid))
    progress.tick()


def _result(read_stream: Any, query: Any, state: BacktestState, folder: Path, status: str,
            note: str | None = None) -> Result:
    """Decisions, scorecard, chart and write-up of a backtest, from its runs and the memory
    read model (so `report` later shows outcomes resolved since)."""
    from projections.views import entries_from_rows
    assert state.request is not None
    run_ids = state.run_ids
    facts = {rid: run_facts(read_stream(rid)) for rid in run_ids}
    entries = entries_from_rows(query("memory_of_runs", {"run_ids": run_ids}))
    decisions = decision_outcomes(state, facts, entries)
    scores = scorecard(decisions, state.request.bearish) if status == "completed" else []
    folder.mkdir(parents=True, exist_ok=True)
    chart = None
    if any(x.raw_return is not None for x in decisions):
        from cli.charts import render_chart
        chart = render_chart(folder / CHART, decisions, bearish=state.request.bearish,
                             title=f"backtest {state.backtest_id}").name
    (folder / REPORT).write_text(render_backtest(state, decisions, scores, chart,
                                                 completed=status == "completed"),
                                 encoding="utf-8")
    rows = [_row(x, folder.parent) for x in decisions]
    return Result(state.backtest_id, status, rows, decisions, scores, folder, note)


def _row(x: DecisionOutcome, reports: Path) -> dict:
    return {"ticker": x.ticker, "trade_date": str(x.trade_date), "run_id": x.run_id,
            "status": x.status, "rating": x.rating, "reason": x.reason,
            "reports": str(reports / x.run_id / "complete_report.md") if x.rating else None}


def _folder(store: Path, out: Path | None, backtest_id: str) -> Path:
    return (out or Path(store).expanduser().parent / "reports") / backtest_id


def _finish(result: Result, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({
            "backtest_id": result.backtest_id, "status": result.status, "runs": result.rows,
            "decisions": [x.as_json() for x in result.decisions],
            "scorecard": [s.model_dump(mode="json") for s in result.scores],
            "report": str(result.folder / REPORT) if result.folder else None,
            "chart": str(result.folder / CHART) if result.folder and
            (result.folder / CHART).exists() else None}, indent=2))
    else:
        console = display.out()
        console.print(display.final_table(result.rows))
        if result.scores:
            console.print(scorecard_table(result.scores))
        console.print(f"backtest {result.backtest_id}: {result.status}; report "
                      f"{result.folder / REPORT if result.folder else '-'}")
    if result.note:
        display.err.print(result.note, markup=False, soft_wrap=True)
    if any(r["status"] == "failed" for r in result.rows) or (
            result.status != "completed" and not (result.note or "").startswith("stopped")):
        raise typer.Exit(1)


def scorecard_table(scores: list[TickerScore]) -> Any:
    from rich.table import Table
    table = Table(title="backtest scorecard (policy: Buy/Overweight long, Hold flat, "
                  f"Underweight/Sell {scores[0].bearish})")
    for col in ("ticker", "decisions", "Hold rate", "hit rate", "policy", "buy & hold",
                "benchmark", "alpha long", "alpha short"):
        table.add_column(col, justify="left" if col == "ticker" else "right")
    for s in scores:
        table.add_row(*(display.plain(c) for c in (
            s.ticker, s.decisions, share(s.hold_rate), share(s.hit_rate), pct(s.policy_return),
            pct(s.buy_hold_return), pct(s.benchmark_return), pct(s.mean_alpha_long),
            pct(s.mean_alpha_short))))
    return table


def eta_line(backtest_id: str, done: int, total: int, done_here: int, elapsed: float) -> str:
    """``done`` of ``total`` runs have ended, ``done_here`` of them in this command, which has
    been going ``elapsed`` seconds; the ETA assumes the remaining runs take as long."""
    left = total - done
    eta = "?" if not done_here else _seconds(elapsed / done_here * left)
    return (f"backtest {backtest_id}: {done}/{total} runs ({done / total:.0%}) · "
            f"{_seconds(elapsed)} elapsed · ETA {eta if left else '0s'}")


def _seconds(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


class Progress:
    """One line with an ETA: redrawn in place on a terminal, one line per date otherwise,
    nothing with --json. Runs are counted by their RunCompleted / RunFailed events."""

    def __init__(self, backtest_id: str, total: int, done: int, *, quiet: bool):
        self.backtest_id, self.total, self.done, self.quiet = backtest_id, total, done, quiet
        self.done_here, self.started = 0, time.monotonic()
        self.watched: set[str] = set()
        self.position = 0
        self.session: Any = None
        self.live: Any = None

    def __enter__(self) -> Progress:
        if not self.quiet and display.err.is_terminal:
            from rich.live import Live
            self.live = Live(self._text(), console=display.err, refresh_per_second=2,
                             redirect_stdout=False, transient=True)
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.stop()

    def _text(self) -> Any:
        from rich.text import Text
        return Text(eta_line(self.backtest_id, self.done, self.total, self.done_here,
                             time.monotonic() - self.started))

    def watch(self, run_ids: list[str], session: Any, after: int) -> None:
        """Count these runs as they end; their ends come after position ``after``."""
        self.watched, self.session = set(run_ids), session
        self.position = max(self.position, after)

    def tick(self) -> None:
        if self.quiet or self.session is None:
            return
        for e in self.session.read_all(self.position, ["RunCompleted", "RunFailed"]):
            self.position = max(self.position, e.position)
            if e.stream in self.watched:
                self.watched.discard(e.stream)
                self.done, self.done_here = self.done + 1, self.done_here + 1
        if self.live:
            self.live.update(self._text())

    def date_done(self, n: int, dates: int, day: dt.date) -> None:
        if not self.quiet and not self.live:
            line = eta_line(self.backtest_id, self.done, self.total, self.done_here,
                            time.monotonic() - self.started)
            display.err.print(f"{line} · date {n}/{dates} {day} done", markup=False,
                              soft_wrap=True)


def replay_backtest(backtest_id: str, *, store: Path, address: str | None,
                    as_json: bool) -> None:
    """Audit a backtest: its timeline, its hash chain and every run's, and each run's end."""
    from cli.stores import open_reader
    from projections.timeline import timeline
    reader = open_reader(store, address)
    try:
        check = reader.verify(backtest_id)
        events = reader.read_stream(backtest_id)
        state = _state(events, backtest_id, store)
        runs = {rid: (reader.verify(rid), run_facts(reader.read_stream(rid)))
                for rid in state.run_ids}
    finally:
        reader.close()
    broken = [rid for rid, (v, _) in runs.items() if not v.ok]
    status = "completed" if state.completed else "incomplete"
    if as_json:
        typer.echo(json.dumps({
            "backtest_id": backtest_id, "verified": check.ok, "problem": check.problem,
            "status": status, "planned": len(state.plan), "started": len(state.started),
            "runs": [{"run_id": rid, "verified": v.ok, "status": f.status, "rating": f.rating}
                     for rid, (v, f) in runs.items()],
            "events": [{"type": e.type, "seq": e.seq, "position": e.position, "actor": e.actor,
                        "recorded_at": e.recorded_at.isoformat(), "hash": e.hash,
                        "payload": e.payload.model_dump(mode="json")} for e in events]},
            default=str))
    else:
        console = display.out()
        console.print(display.timeline_table(timeline(events), backtest_id))
        ended = sum(f.status in ENDED for _, f in runs.values())
        for line in (f"hash chain: {'intact' if check.ok else f'BROKEN: {check.problem}'}",
                     f"status: {status}",
                     f"runs: {len(state.started)} of {len(state.plan)} started, {ended} ended; "
                     f"their chains: " + ("intact" if not broken else
                                          f"BROKEN in {' '.join(broken)}")):
            console.print(line, soft_wrap=True)
    if not check.ok or broken:
        raise typer.Exit(1)


def report_backtest(backtest_id: str, *, store: Path, address: str | None, out: Path) -> None:
    """Write the backtest's report and chart from the store (outcomes resolved since the
    backtest ended are included)."""
    from cli.views import LocalViews, open_views
    views = open_views(store, address)
    try:  # the local read models hold the file open: read its events through them
        reader = views.store if isinstance(views, LocalViews) else views
        state = _state(reader.read_stream(backtest_id), backtest_id, store)
        _result(reader.read_stream, views.query, state, out,
                "completed" if state.completed else "incomplete")
    finally:
        views.close()
    typer.echo(f"wrote {REPORT}" + (f" and {CHART}" if (out / CHART).exists() else "")
               + f" to {out}")
