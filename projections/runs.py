"""One line per run across the store: what `ta-actors runs` lists."""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, replace

from events.envelope import StoredEvent

#: Event types this projection needs (the store can filter on them).
RUN_SUMMARY_TYPES = ("RunRequested", "RunResumed", "PortfolioDecisionIssued", "RunCompleted",
                     "RunFailed")


@dataclass(frozen=True, slots=True)
class RunSummary:
    run_id: str
    ticker: str
    trade_date: dt.date
    status: str  # incomplete (running now, or interrupted: `resume` it) | completed | failed
    rating: str | None
    started_at: dt.datetime
    updated_at: dt.datetime
    reason: str | None = None


def summarize_runs(events: Iterable[StoredEvent]) -> list[RunSummary]:
    from events import domain as d  # late: read-model queries need no pydantic
    runs: dict[str, RunSummary] = {}
    for e in events:
        p, run = e.payload, runs.get(e.stream)
        if isinstance(p, d.RunRequested):
            runs[e.stream] = RunSummary(e.stream, p.config.ticker, p.config.trade_date,
                                        "incomplete", None, e.recorded_at, e.recorded_at)
            continue
        if run is None:
            continue
        match p:
            case d.RunResumed():
                run = replace(run, status="incomplete", reason=None)
            case d.PortfolioDecisionIssued():
                run = replace(run, rating=p.decision.rating.value)
            case d.RunCompleted():
                run = replace(run, status="completed", rating=p.rating.value)
            case d.RunFailed():
                run = replace(run, status="failed", reason=f"{p.kind}: {p.reason}")
        runs[e.stream] = replace(run, updated_at=e.recorded_at)
    return list(runs.values())
