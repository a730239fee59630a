"""Forking a run: keep a source run's events up to a stage, let another model continue.

"What would another model have decided given the same analyst reports?" is a new stream that
starts with the source's events up to the stage, and then runs normally. Pure: it only
chooses which payloads to copy.
"""
from __future__ import annotations

from collections.abc import Iterable

from events import domain as d
from events.envelope import StoredEvent

#: Stage -> the output types that are kept (everything decided before that stage).
STAGES: dict[str, tuple[str, ...]] = {
    "debate": ("AnalystReportSubmitted",),
    "research_manager": ("AnalystReportSubmitted", "DebateArgumentMade"),
    "trader": ("AnalystReportSubmitted", "DebateArgumentMade", "InvestmentPlanIssued"),
    "risk": ("AnalystReportSubmitted", "DebateArgumentMade", "InvestmentPlanIssued",
             "TradeProposed"),
    "portfolio_manager": ("AnalystReportSubmitted", "DebateArgumentMade",
                          "InvestmentPlanIssued", "TradeProposed", "RiskArgumentMade"),
}
CONTEXT = ("InstrumentResolved", "MarketSnapshotTaken", "PastContextLoaded")


def fork_payloads(events: Iterable[StoredEvent], stage: str) -> list[d.DomainEvent]:
    """The source payloads a fork at ``stage`` starts from, in their recorded order: the
    context, and every kept turn with its assignment, model calls and tool calls."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; choose from {', '.join(STAGES)}")
    events = list(events)
    kept_turns = {e.payload.turn_id for e in events if e.type in STAGES[stage]}
    chosen = []
    for e in events:
        turn = getattr(e.payload, "turn_id", None)
        if e.type in CONTEXT or (turn is not None and turn in kept_turns):
            chosen.append(e.payload)
    return chosen
