"""The event catalogue: every fact ta-actors records, as one discriminated union.

Names are past-tense facts. Each class's ``type`` literal is its stored name; bump
``SCHEMA_VERSION`` and register an upcaster in events.codec when a payload changes shape.
"""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from events.backtest import Bearish, TickerScore
from events.config import Analyst, RunConfig
from events.decisions import (OutputMode, PortfolioDecision, ResearchPlan, SentimentReport,
                              TradeProposal)
from events.rating import Rating
from events.records import Attempt, Instrument, MarketSnapshot, Message, ToolCall, ToolResult

Role = Literal["market", "social", "news", "fundamentals", "bull", "bear", "research_manager",
               "trader", "aggressive", "conservative", "neutral", "portfolio_manager", "reflector"]
Tier = Literal["quick", "deep"]


class DomainEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    SCHEMA_VERSION: ClassVar[int] = 1
    if TYPE_CHECKING:  # every event class declares its own Literal ``type`` field
        type: str


# --- run lifecycle -------------------------------------------------------------------------
class RunRequested(DomainEvent):
    type: Literal["RunRequested"] = "RunRequested"
    run_id: str
    config: RunConfig
    forked_from: str | None = None  # source run of a fork; its events up to a stage are copied
    forked_at: str | None = None  # the stage the fork continues from


class RunResumed(DomainEvent):
    type: Literal["RunResumed"] = "RunResumed"
    reason: str = "resume requested"
    token_budget: int | None = None
    cost_budget_usd: float | None = None
    #: RunConfig fields this resume changes from here on (only the local-model settings:
    #: concurrency, timeouts, context window), e.g. a longer idle timeout for a slow server
    settings: dict[str, float | int] = Field(default_factory=dict, exclude_if=lambda v: not v)


class RunDriven(DomainEvent):
    """A driver claims the run: from here on only ``owner`` appends to it. Appended with the
    run's expected version, so of two claims on the same version exactly one lands."""
    type: Literal["RunDriven"] = "RunDriven"
    owner: str  # replica name / incarnation id of the process driving the run
    node: str | None = None


class RunCompleted(DomainEvent):
    type: Literal["RunCompleted"] = "RunCompleted"
    rating: Rating


class RunFailed(DomainEvent):
    type: Literal["RunFailed"] = "RunFailed"
    kind: Literal["error", "budget", "data", "llm", "interrupted", "infrastructure"]
    reason: str
    role: Role | None = None


# --- context resolved before the analysts ---------------------------------------------------
class InstrumentResolved(DomainEvent):
    type: Literal["InstrumentResolved"] = "InstrumentResolved"
    instrument: Instrument


class MarketSnapshotTaken(DomainEvent):
    type: Literal["MarketSnapshotTaken"] = "MarketSnapshotTaken"
    snapshot: MarketSnapshot | None
    note: str | None = None


class PastContextLoaded(DomainEvent):
    type: Literal["PastContextLoaded"] = "PastContextLoaded"
    text: str
    entries: int


# --- turns: the coordinator assigns, a role answers ----------------------------------------
class TurnAssigned(DomainEvent):
    type: Literal["TurnAssigned"] = "TurnAssigned"
    turn_id: str
    role: Role
    round: int = 1


class LLMCallCompleted(DomainEvent):
    type: Literal["LLMCallCompleted"] = "LLMCallCompleted"
    turn_id: str
    role: Role
    call_index: int
    tier: Tier
    model: str
    provider: str
    messages: list[Message]
    response_text: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    structured: dict[str, Any] | None = None
    output_mode: OutputMode = "freetext"
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    attempts: list[Attempt] = Field(default_factory=list)
    # Local models (issue 11): optional, and left out of the stored JSON when unset, so
    # stores written before load and events without them stay byte for byte as they were.
    #: waiting for a slot on the endpoint (never part of a timeout)
    queued_ms: float | None = Field(None, exclude_if=lambda v: v is None)
    #: chunks the reply streamed in (None: not streamed)
    stream_chunks: int | None = Field(None, exclude_if=lambda v: v is None)
    first_chunk_ms: float | None = Field(None, exclude_if=lambda v: v is None)
    #: what was cut from the prompt to fit the model's context window
    condensed: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)


class LLMCallFailed(DomainEvent):
    type: Literal["LLMCallFailed"] = "LLMCallFailed"
    turn_id: str
    role: Role
    call_index: int
    model: str
    error: str
    attempts: list[Attempt] = Field(default_factory=list)


class ToolCallCompleted(DomainEvent):
    type: Literal["ToolCallCompleted"] = "ToolCallCompleted"
    turn_id: str
    role: Role
    call_id: str
    tool: str
    arguments: dict[str, Any]
    result: ToolResult
    latency_ms: float = 0.0


class ToolCapReached(DomainEvent):
    type: Literal["ToolCapReached"] = "ToolCapReached"
    turn_id: str
    role: Role
    cap: int


# --- role outputs ---------------------------------------------------------------------------
class AnalystReportSubmitted(DomainEvent):
    type: Literal["AnalystReportSubmitted"] = "AnalystReportSubmitted"
    turn_id: str
    analyst: Analyst
    report: str
    #: The social analyst's structured read (band, score, confidence, narrative) and how it
    #: was obtained; None for the other analysts and for runs recorded before it existed.
    sentiment: SentimentReport | None = None
    output_mode: OutputMode | None = None


class DebateArgumentMade(DomainEvent):
    type: Literal["DebateArgumentMade"] = "DebateArgumentMade"
    turn_id: str
    speaker: Literal["bull", "bear"]
    round: int
    argument: str


class InvestmentPlanIssued(DomainEvent):
    type: Literal["InvestmentPlanIssued"] = "InvestmentPlanIssued"
    turn_id: str
    plan: ResearchPlan
    output_mode: OutputMode


class TradeProposed(DomainEvent):
    type: Literal["TradeProposed"] = "TradeProposed"
    turn_id: str
    proposal: TradeProposal
    output_mode: OutputMode


class RiskArgumentMade(DomainEvent):
    type: Literal["RiskArgumentMade"] = "RiskArgumentMade"
    turn_id: str
    speaker: Literal["aggressive", "conservative", "neutral"]
    round: int
    argument: str


class PortfolioDecisionIssued(DomainEvent):
    type: Literal["PortfolioDecisionIssued"] = "PortfolioDecisionIssued"
    turn_id: str
    decision: PortfolioDecision
    output_mode: OutputMode


class GroundingChecked(DomainEvent):
    """The grounding audit of one role output (projections.grounding.check_output, a pure
    function of the events before it), appended with the output. Lean: counts, the events
    the grounded figures came from, and only the flagged figures in full."""
    type: Literal["GroundingChecked"] = "GroundingChecked"
    turn_id: str
    role: Role
    model: str  # the model that wrote the output
    grounded: int = 0
    derived: int = 0
    sources: dict[str, int] = Field(default_factory=dict)  # source event -> figures from it
    flagged: list[tuple[str, Literal["ungrounded", "look_ahead"]]] = Field(
        default_factory=list)  # (figure as written, verdict), in text order

    @property
    def ungrounded(self) -> int:
        return sum(kind == "ungrounded" for _, kind in self.flagged)

    @property
    def look_ahead(self) -> int:
        return sum(kind == "look_ahead" for _, kind in self.flagged)

    @property
    def checked(self) -> int:
        return self.grounded + self.derived + len(self.flagged)


# --- memory stream: outcomes and reflections ------------------------------------------------
class OutcomeResolved(DomainEvent):
    type: Literal["OutcomeResolved"] = "OutcomeResolved"
    run_id: str
    ticker: str
    trade_date: dt.date
    rating: Rating
    raw_return: float
    benchmark: str
    benchmark_return: float
    alpha: float
    holding_days: int
    resolved_on: dt.date


class ReflectionRecorded(DomainEvent):
    type: Literal["ReflectionRecorded"] = "ReflectionRecorded"
    run_id: str
    ticker: str
    trade_date: dt.date
    reflection: str
    model: str


# --- backtest stream: its plan, the runs it started, its scorecard ----------------------------
class BacktestRequested(DomainEvent):
    """The whole plan, so `resume BACKTEST_ID` can finish it: one config per ticker (its
    ``trade_date`` is the first date; each run copies it with its own date) and the dates."""
    type: Literal["BacktestRequested"] = "BacktestRequested"
    backtest_id: str
    configs: list[RunConfig]
    dates: list[dt.date]
    bearish: Bearish = "short"


class BacktestRunStarted(DomainEvent):
    """Recorded before the run's own RunRequested, so a crash in between is finished by
    resume rather than started twice."""
    type: Literal["BacktestRunStarted"] = "BacktestRunStarted"
    run_id: str
    ticker: str
    trade_date: dt.date


class BacktestCompleted(DomainEvent):
    type: Literal["BacktestCompleted"] = "BacktestCompleted"
    runs: int
    completed: int
    resolved: int
    scorecard: list[TickerScore]


EVENT_TYPES: dict[str, type[DomainEvent]] = {
    cls.model_fields["type"].default: cls for cls in DomainEvent.__subclasses__()}
