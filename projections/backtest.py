"""A backtest as a stream: its plan, the runs it started, and what the ratings earned.

Pure folds and arithmetic, no I/O. The policy follows the ratings (events.backtest.POSITION):
each decision's position is held over that decision's own scored holding period (the
OutcomeResolved of the memory stream), and the periods are compounded in date order. With
``--every`` equal to ``--holding-days`` (both 5 by default) the periods tile the calendar, so
buy-and-hold over the same periods is plain buy-and-hold.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from events import domain as d
from events.backtest import POSITION, Bearish
from events.config import RunConfig
from events.envelope import StoredEvent
from events.rating import Rating
from projections.memory import MemoryEntry

BACKTEST_PREFIX = "backtest-"


def is_backtest_id(stream: str) -> bool:
    """Backtest ids start with a lower-case prefix no ticker (always upper case) can have."""
    return stream.startswith(BACKTEST_PREFIX)


@dataclass(frozen=True, slots=True)
class BacktestState:
    backtest_id: str
    request: d.BacktestRequested | None = None
    started: dict[tuple[str, dt.date], str] = field(default_factory=dict)  # -> run id
    completed: d.BacktestCompleted | None = None

    @property
    def plan(self) -> list[tuple[dt.date, str]]:
        """Every (date, ticker) the backtest is to run, dates in order."""
        if self.request is None:
            return []
        return [(day, c.ticker) for day in self.request.dates for c in self.request.configs]

    def config_for(self, ticker: str, day: dt.date) -> RunConfig:
        assert self.request is not None
        template = next(c for c in self.request.configs if c.ticker == ticker)
        return template.model_copy(update={"trade_date": day})

    @property
    def run_ids(self) -> list[str]:
        return [self.started[key] for key in sorted(self.started)]


def project_backtest(events: Iterable[StoredEvent], backtest_id: str = "") -> BacktestState:
    started: dict[tuple[str, dt.date], str] = {}
    request, completed = None, None
    for e in events:
        p = e.payload
        match p:
            case d.BacktestRequested():
                request, backtest_id = p, p.backtest_id
            case d.BacktestRunStarted():
                started.setdefault((p.ticker, p.trade_date), p.run_id)
            case d.BacktestCompleted():
                completed = p
    return BacktestState(backtest_id, request, started, completed)


@dataclass(frozen=True, slots=True)
class DecisionOutcome:
    """One decision of a backtest and how it turned out (fractions; None while unresolved
    or when the run did not decide)."""
    ticker: str
    trade_date: dt.date
    run_id: str
    status: str
    rating: str | None = None
    close: float | None = None  # the close the run saw on its trade date
    reason: str | None = None  # why the run failed
    raw_return: float | None = None
    alpha: float | None = None
    benchmark: str | None = None
    benchmark_return: float | None = None
    holding_days: int | None = None
    resolved_on: dt.date | None = None

    def as_json(self) -> dict:
        return {"ticker": self.ticker, "trade_date": str(self.trade_date),
                "run_id": self.run_id, "status": self.status, "rating": self.rating,
                "reason": self.reason, "raw_return": self.raw_return, "alpha": self.alpha,
                "benchmark": self.benchmark, "benchmark_return": self.benchmark_return,
                "holding_days": self.holding_days,
                "resolved_on": str(self.resolved_on) if self.resolved_on else None}


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the backtest needs from a run's own stream."""
    status: str
    rating: str | None
    close: float | None
    reason: str | None = None  # why it failed


def run_facts(events: Iterable[StoredEvent]) -> RunFacts:
    status, rating, close, reason = "incomplete", None, None, None
    for e in events:
        p = e.payload
        match p:
            case d.MarketSnapshotTaken() if p.snapshot is not None:
                close = p.snapshot.last_bar.close
            case d.PortfolioDecisionIssued():
                rating = p.decision.rating.value
            case d.RunCompleted():
                status, rating = "completed", p.rating.value
            case d.RunFailed():
                status, reason = "failed", f"{p.kind}: {p.reason}"
            case d.RunResumed():
                status, reason = "incomplete", None
    return RunFacts(status, rating, close, reason)


def decision_outcomes(state: BacktestState, facts: dict[str, RunFacts],
                      entries: Iterable[MemoryEntry]) -> list[DecisionOutcome]:
    """Every started run of the backtest, dates in order then tickers as requested."""
    by_run = {m.run_id: m for m in entries}
    order = {c.ticker: i for i, c in enumerate(state.request.configs)} if state.request else {}
    rows = []
    for (ticker, day), run_id in sorted(state.started.items(),
                                        key=lambda kv: (kv[0][1], order.get(kv[0][0], 0))):
        f = facts.get(run_id, RunFacts("incomplete", None, None))
        m = by_run.get(run_id)
        o = m.outcome if m else None
        rows.append(DecisionOutcome(
            ticker, day, run_id, f.status, (m.rating if m else f.rating), f.close, f.reason,
            o.raw_return if o else None, o.alpha if o else None, o.benchmark if o else None,
            o.benchmark_return if o else None, o.holding_days if o else None,
            o.resolved_on if o else None))
    return rows


@dataclass(frozen=True, slots=True)
class CurvePoint:
    day: dt.date
    policy: float  # equity, starting at 1.0
    buy_hold: float
    benchmark: float


def equity_curve(decisions: Iterable[DecisionOutcome], bearish: Bearish) -> list[CurvePoint]:
    """One ticker's equity through its resolved decisions, in date order: a point at the first
    trade date (1.0) and one at the end of each holding period."""
    done = sorted((x for x in decisions if x.raw_return is not None and x.rating),
                  key=lambda x: x.trade_date)
    if not done:
        return []
    policy = hold = bench = 1.0
    points = [CurvePoint(done[0].trade_date, 1.0, 1.0, 1.0)]
    for x in done:
        assert x.raw_return is not None and x.benchmark_return is not None
        assert x.rating is not None and x.resolved_on is not None
        policy *= 1 + POSITION[bearish][Rating(x.rating)] * x.raw_return
        hold *= 1 + x.raw_return
        bench *= 1 + x.benchmark_return
        points.append(CurvePoint(x.resolved_on, policy, hold, bench))
    return points


def combined_curve(curves: list[list[CurvePoint]]) -> list[CurvePoint]:
    """Equal capital in every ticker at the start, never rebalanced: on each date, the mean of
    the tickers' latest equity (1.0 before a ticker's first point)."""
    curves = [c for c in curves if c]
    if not curves:
        return []
    days = sorted({p.day for c in curves for p in c})
    points = []
    for day in days:
        latest = [next((p for p in reversed(c) if p.day <= day), None) for c in curves]
        n = len(curves)
        points.append(CurvePoint(
            day, sum(p.policy if p else 1.0 for p in latest) / n,
            sum(p.buy_hold if p else 1.0 for p in latest) / n,
            sum(p.benchmark if p else 1.0 for p in latest) / n))
    return points
