"""The memory log: past decisions, their realised outcomes and the lessons drawn from them.

Every PortfolioDecisionIssued is a pending entry; OutcomeResolved and ReflectionRecorded (on
the ``memory`` stream) resolve it. Past context for a new decision is drawn only from entries
whose outcome was knowable on the new trade date, so memory cannot leak the future.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from events.envelope import StoredEvent

if TYPE_CHECKING:
    from events import domain as d

MEMORY_STREAM = "memory"
MEMORY_TYPES = ("RunRequested", "PortfolioDecisionIssued", "OutcomeResolved", "ReflectionRecorded")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the market did after a decision (an OutcomeResolved without its identity): plain
    data, so a read-model query can build it without loading the event models."""
    raw_return: float
    benchmark: str
    benchmark_return: float
    alpha: float
    holding_days: int
    resolved_on: dt.date

    @classmethod
    def of(cls, event: d.OutcomeResolved) -> Outcome:
        return cls(event.raw_return, event.benchmark, event.benchmark_return, event.alpha,
                   event.holding_days, event.resolved_on)


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    run_id: str
    ticker: str
    trade_date: dt.date
    rating: str
    decision: str
    outcome: Outcome | None = None
    reflection: str | None = None

    @property
    def resolved(self) -> bool:
        return self.outcome is not None

    def tag(self) -> str:
        if self.outcome is None:
            return f"[{self.trade_date} | {self.ticker} | {self.rating} | pending]"
        o = self.outcome
        return (f"[{self.trade_date} | {self.ticker} | {self.rating} | {o.raw_return:+.1%} | "
                f"{o.alpha:+.1%} | {o.holding_days}d]")


def memory_entries(events: Iterable[StoredEvent]) -> list[MemoryEntry]:
    """Entries in decision order; a later decision for the same (ticker, date) replaces the
    earlier one (the log is idempotent per ticker and date)."""
    from events import domain as d  # late: read-model queries need no pydantic
    requested: dict[str, tuple[str, dt.date]] = {}
    entries: dict[str, MemoryEntry] = {}
    for e in events:
        p = e.payload
        match p:
            case d.RunRequested():
                requested[e.stream] = (p.config.ticker, p.config.trade_date)
            case d.PortfolioDecisionIssued() if e.stream in requested:
                ticker, day = requested[e.stream]
                for rid, old in list(entries.items()):
                    if (old.ticker, old.trade_date) == (ticker, day) and not old.resolved:
                        del entries[rid]
                entries[e.stream] = MemoryEntry(e.stream, ticker, day, p.decision.rating.value,
                                                p.decision.render())
            case d.OutcomeResolved() if p.run_id in entries:
                entries[p.run_id] = replace(entries[p.run_id], outcome=Outcome.of(p))
            case d.ReflectionRecorded() if p.run_id in entries:
                entries[p.run_id] = replace(entries[p.run_id], reflection=p.reflection)
    return list(entries.values())


_THESIS_MARK = "**Investment Thesis**:"


def thesis_of(decision: str) -> str:
    """The investment thesis inside a rendered PortfolioDecision (up to the next field)."""
    if _THESIS_MARK not in decision:
        return ""
    return decision.split(_THESIS_MARK, 1)[1].split("\n\n**", 1)[0].strip()


def pending_for(entries: list[MemoryEntry], ticker: str, before: dt.date) -> list[MemoryEntry]:
    """Unresolved decisions on ``ticker`` made before ``before``: candidates to score now."""
    return [m for m in entries if m.ticker == ticker and not m.resolved and m.trade_date < before]


def past_context(entries: list[MemoryEntry], ticker: str, trade_date: dt.date,
                 n_same: int = 5, n_cross: int = 3) -> tuple[str, int]:
    """Text for the portfolio manager and how many entries it holds. Only outcomes resolved on
    or before ``trade_date`` are knowable then; newest first; same ticker in full."""
    known = [m for m in entries if m.outcome is not None and m.outcome.resolved_on <= trade_date
             and m.trade_date < trade_date]
    known.sort(key=lambda m: m.trade_date, reverse=True)
    same = [m for m in known if m.ticker == ticker][:n_same]
    cross = [m for m in known if m.ticker != ticker][:n_cross]
    if not same and not cross:
        return "", 0
    parts = []
    if same:
        parts.append(f"Past decisions on {ticker} and how they turned out:")
        parts += [f"{m.tag()}\nDECISION: {m.decision}\nREFLECTION: {m.reflection or '(none)'}"
                  for m in same]
    if cross:
        parts.append("Lessons from other tickers:")
        parts += [f"{m.tag()} {m.reflection or m.decision[:300]}" for m in cross]
    return "\n\n".join(parts), len(same) + len(cross)


def render_log(entries: list[MemoryEntry]) -> str:
    """The whole log as text, oldest first (what `ta-actors memory show` prints)."""
    blocks = []
    for m in sorted(entries, key=lambda m: (m.trade_date, m.ticker)):
        block = f"{m.tag()}\nDECISION: {m.decision}"
        if m.reflection:
            block += f"\nREFLECTION: {m.reflection}"
        blocks.append(block)
    return "\n<!-- ENTRY_END -->\n".join(blocks)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2%}"


def render_markdown(entries: list[MemoryEntry], *, title: str = "Memory log") -> str:
    """The log as a markdown document (what `ta-actors memory export` writes): a summary table,
    then one section per decision with its outcome, decision and lesson; oldest first."""
    ordered = sorted(entries, key=lambda m: (m.trade_date, m.ticker))
    lines = [f"# {title}", "", f"{len(ordered)} decisions, "
             f"{sum(m.resolved for m in ordered)} resolved.", ""]
    if ordered:
        lines += ["| date | ticker | rating | return | alpha | benchmark | days | run |",
                  "|---|---|---|---:|---:|---|---:|---|"]
        for m in ordered:
            o = m.outcome
            lines.append(f"| {m.trade_date} | {m.ticker} | {m.rating} | "
                         f"{_pct(o.raw_return if o else None)} | {_pct(o.alpha if o else None)} "
                         f"| {o.benchmark if o else '—'} | {o.holding_days if o else '—'} | "
                         f"`{m.run_id}` |")
    for m in ordered:
        o = m.outcome
        outcome = (f"{o.raw_return:+.2%} raw, {o.alpha:+.2%} alpha against {o.benchmark} over "
                   f"{o.holding_days} trading days (resolved {o.resolved_on})" if o
                   else "pending: the holding period has not passed yet")
        lines += ["", f"## {m.trade_date} · {m.ticker} · {m.rating}", "",
                  f"- run: `{m.run_id}`", f"- outcome: {outcome}", "", "### Decision", "",
                  m.decision.strip(), "", "### Reflection", "",
                  (m.reflection or "(none yet)").strip()]
    return "\n".join(lines) + "\n"
