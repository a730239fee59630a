"""The audit timeline: one line per event, with a short human summary."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from events.envelope import StoredEvent


def _clip(text: str, n: int = 90) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


#: Event type -> summary of its payload (data, not an if-ladder).
SUMMARIES: dict[str, Callable[[Any], str]] = {
    "RunRequested": lambda e: (f"{e.config.ticker} {e.config.trade_date} analysts="
                               f"{','.join(e.config.analysts)} rounds={e.config.debate_rounds}/"
                               f"{e.config.risk_rounds} models={e.config.quick_model},{e.config.deep_model}"),
    "RunResumed": lambda e: e.reason,
    "RunDriven": lambda e: f"driven by {e.owner}" + (f" on {e.node[:12]}" if e.node else ""),
    "RunCompleted": lambda e: f"rating {e.rating.value}",
    "RunFailed": lambda e: f"{e.kind}: {_clip(e.reason)}",
    "InstrumentResolved": lambda e: (
        f"{e.instrument.symbol}: {e.instrument.name} ({e.instrument.exchange or '?'}) via "
        f"{e.instrument.vendor}" if e.instrument.available and e.instrument.name
        else f"{e.instrument.symbol}: {e.instrument.note or 'identity unavailable'}"),
    "MarketSnapshotTaken": lambda e: (f"last bar {e.snapshot.last_bar.date} close "
                                      f"{e.snapshot.last_bar.close:.2f} via {e.snapshot.vendor}"
                                      if e.snapshot else f"no snapshot: {e.note}"),
    "PastContextLoaded": lambda e: f"{e.entries} past decisions",
    "TurnAssigned": lambda e: f"{e.turn_id} -> {e.role}",
    "LLMCallCompleted": lambda e: (f"{e.role} #{e.call_index} {e.model} {e.output_mode} "
                                   f"{e.input_tokens}+{e.output_tokens} tok {e.latency_ms:.0f} ms"
                                   + (f" tools={','.join(t.name for t in e.tool_calls)}"
                                      if e.tool_calls else "")),
    "LLMCallFailed": lambda e: f"{e.role} {e.model}: {_clip(e.error)}",
    "ToolCallCompleted": lambda e: (f"{e.tool}({', '.join(f'{k}={v}' for k, v in e.arguments.items())})"
                                    f" {e.result.status} via {e.result.vendor}"),
    "ToolCapReached": lambda e: f"{e.role} hit the cap of {e.cap} tool calls",
    "AnalystReportSubmitted": lambda e: f"{e.analyst}: " + (
        f"{e.sentiment.band.value}, score {e.sentiment.score:g} ({e.output_mode}) "
        if e.sentiment else _clip(e.report, 70)),
    "DebateArgumentMade": lambda e: f"{e.speaker} r{e.round}: {_clip(e.argument, 70)}",
    "InvestmentPlanIssued": lambda e: f"{e.plan.recommendation.value} ({e.output_mode})",
    "TradeProposed": lambda e: f"{e.proposal.action.value} ({e.output_mode})",
    "RiskArgumentMade": lambda e: f"{e.speaker} r{e.round}: {_clip(e.argument, 70)}",
    "PortfolioDecisionIssued": lambda e: f"{e.decision.rating.value} ({e.output_mode})",
    "GroundingChecked": lambda e: (f"{e.role}: {e.checked} figures, {e.grounded} grounded, "
                                   f"{e.derived} derived, {e.ungrounded} ungrounded, "
                                   f"{e.look_ahead} look-ahead"
                                   + (f" ({_clip(', '.join(r for r, _ in e.flagged), 40)})"
                                      if e.flagged else "")),
    "OutcomeResolved": lambda e: (f"{e.ticker} {e.trade_date} {e.rating.value}: raw "
                                  f"{e.raw_return:+.2%} alpha {e.alpha:+.2%} over {e.holding_days}d"),
    "ReflectionRecorded": lambda e: f"{e.ticker} {e.trade_date}: {_clip(e.reflection, 70)}",
    "BacktestRequested": lambda e: (f"{' '.join(c.ticker for c in e.configs)} on {len(e.dates)} "
                                    f"dates {e.dates[0]}..{e.dates[-1]} bearish={e.bearish}"
                                    if e.dates else "no dates"),
    "BacktestRunStarted": lambda e: f"{e.ticker} {e.trade_date} -> {e.run_id}",
    "BacktestCompleted": lambda e: (f"{e.completed}/{e.runs} runs completed, {e.resolved} "
                                    "resolved" + "".join(
                                        f"; policy {s.policy_return:+.2%}" for s in e.scorecard
                                        if s.ticker == "ALL" and s.policy_return is not None)),
}


@dataclass(frozen=True, slots=True)
class TimelineRow:
    seq: int
    recorded_at: str
    actor: str
    type: str
    summary: str


def timeline(events: Iterable[StoredEvent]) -> list[TimelineRow]:
    return [TimelineRow(e.seq, e.recorded_at.strftime("%H:%M:%S.%f")[:-3], e.actor, e.type,
                        SUMMARIES.get(e.type, lambda _: "")(e.payload)) for e in events]
