"""The state of one run, folded from its stream. Everything the coordinator and the roles need
to decide and to speak is here; nothing else is kept anywhere."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from events import domain as d
from events.config import RESUMABLE_SETTINGS, RunConfig
from events.decisions import PortfolioDecision, ResearchPlan, TradeProposal
from events.records import Instrument, MarketSnapshot


@dataclass(frozen=True, slots=True)
class Speech:
    speaker: str
    round: int
    text: str
    turn_id: str


@dataclass(frozen=True, slots=True)
class Usage:
    llm_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add_llm(self, e: d.LLMCallCompleted) -> Usage:
        return replace(self, llm_calls=self.llm_calls + 1,
                       input_tokens=self.input_tokens + e.input_tokens,
                       output_tokens=self.output_tokens + e.output_tokens,
                       cost_usd=self.cost_usd + e.cost_usd)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class RunState:
    run_id: str | None = None
    config: RunConfig | None = None
    status: str = "new"  # new | running | completed | failed
    instrument: Instrument | None = None
    snapshot_taken: bool = False
    snapshot: MarketSnapshot | None = None
    past_context: str | None = None
    assigned: dict[str, d.TurnAssigned] = field(default_factory=dict)
    answered: dict[str, str] = field(default_factory=dict)  # turn_id -> output event type
    reports: dict[str, str] = field(default_factory=dict)
    debate: tuple[Speech, ...] = ()
    plan: ResearchPlan | None = None
    proposal: TradeProposal | None = None
    risk: tuple[Speech, ...] = ()
    decision: PortfolioDecision | None = None
    grounding: dict[str, d.GroundingChecked] = field(default_factory=dict)  # turn_id -> audit
    calls: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # turn -> LLM/tool events
    capped: frozenset[str] = frozenset()
    usage: Usage = Usage()
    failure: d.RunFailed | None = None
    driver: str | None = None  # owner of the latest RunDriven claim
    token_budget: int | None = None
    cost_budget_usd: float | None = None
    version: int = 0

    @property
    def ticker(self) -> str:
        return self.config.ticker if self.config else "?"

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed")

    @property
    def rating(self) -> str | None:
        return self.decision.rating.value if self.decision else None

    def budget_exceeded(self) -> str | None:
        """Why the run may not spend more, or None."""
        if self.token_budget is not None and self.usage.tokens >= self.token_budget:
            return f"token budget {self.token_budget:,} reached ({self.usage.tokens:,} used)"
        if self.cost_budget_usd is not None and self.usage.cost_usd >= self.cost_budget_usd:
            return (f"cost budget ${self.cost_budget_usd:.4f} reached "
                    f"(${self.usage.cost_usd:.4f} used)")
        return None


def _answer(s: RunState, turn_id: str, kind: str, **changes: Any) -> RunState:
    return replace(s, answered={**s.answered, turn_id: kind}, **changes)


def _record_call(s: RunState, turn_id: str, e: Any) -> tuple[Any, ...]:
    return s.calls.get(turn_id, ()) + (e,)


def apply(s: RunState, e: d.DomainEvent) -> RunState:
    """One step of the fold. Unknown-to-this-projection events leave the state unchanged."""
    match e:
        case d.RunRequested():
            c = e.config
            return replace(s, run_id=e.run_id, config=c, status="running",
                           token_budget=c.token_budget, cost_budget_usd=c.cost_budget_usd)
        case d.RunResumed():
            changed = {k: v for k, v in e.settings.items() if k in RESUMABLE_SETTINGS}
            config = s.config.model_copy(update=changed) if changed and s.config else s.config
            return replace(s, status="running", failure=None, config=config,
                           token_budget=e.token_budget if e.token_budget else s.token_budget,
                           cost_budget_usd=e.cost_budget_usd or s.cost_budget_usd)
        case d.RunDriven():
            return replace(s, driver=e.owner)
        case d.InstrumentResolved():
            return replace(s, instrument=e.instrument)
        case d.MarketSnapshotTaken():
            return replace(s, snapshot_taken=True, snapshot=e.snapshot)
        case d.PastContextLoaded():
            return replace(s, past_context=e.text)
        case d.TurnAssigned():
            return replace(s, assigned={**s.assigned, e.turn_id: e})
        case d.LLMCallCompleted():
            return replace(s, usage=s.usage.add_llm(e),
                           calls={**s.calls, e.turn_id: _record_call(s, e.turn_id, e)})
        case d.ToolCallCompleted():
            return replace(s, usage=replace(s.usage, tool_calls=s.usage.tool_calls + 1),
                           calls={**s.calls, e.turn_id: _record_call(s, e.turn_id, e)})
        case d.ToolCapReached():
            return replace(s, capped=s.capped | {e.turn_id})
        case d.AnalystReportSubmitted():
            return _answer(s, e.turn_id, e.type, reports={**s.reports, e.analyst: e.report})
        case d.DebateArgumentMade():
            speech = Speech(e.speaker, e.round, e.argument, e.turn_id)
            return _answer(s, e.turn_id, e.type, debate=s.debate + (speech,))
        case d.InvestmentPlanIssued():
            return _answer(s, e.turn_id, e.type, plan=e.plan)
        case d.TradeProposed():
            return _answer(s, e.turn_id, e.type, proposal=e.proposal)
        case d.RiskArgumentMade():
            speech = Speech(e.speaker, e.round, e.argument, e.turn_id)
            return _answer(s, e.turn_id, e.type, risk=s.risk + (speech,))
        case d.PortfolioDecisionIssued():
            return _answer(s, e.turn_id, e.type, decision=e.decision)
        case d.GroundingChecked():
            return replace(s, grounding={**s.grounding, e.turn_id: e})
        case d.RunCompleted():
            return replace(s, status="completed")
        case d.RunFailed():
            return replace(s, status="failed", failure=e)
    return s


def project(events: Iterable[Any], state: RunState | None = None) -> RunState:
    """Fold stored events (or bare payloads) into a RunState; pass ``state`` to continue."""
    s = state or RunState()
    for item in events:
        payload = getattr(item, "payload", item)
        s = apply(s, payload)
        seq = getattr(item, "seq", None)
        s = replace(s, version=seq if seq is not None else s.version + 1)
    return s
