"""Every event type survives the store exactly: same class, equal payload, nested records and
all. Replay and resume depend on it, so a new event type without a sample here fails."""
from __future__ import annotations

import datetime as dt

import pytest

from events import domain as d
from events.backtest import RatingScore, TickerScore
from events.codec import decode, encode
from events.config import RunConfig
from events.decisions import PortfolioDecision, ResearchPlan, TradeProposal
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent
from events.memory_store import InMemoryEventStore
from events.rating import Rating, TraderAction
from events.records import (Attempt, Bar, Instrument, MarketSnapshot, Message, ToolCall,
                            ToolResult)

DAY = dt.date(2024, 5, 10)
CONFIG = RunConfig(
    ticker="nvda", trade_date=DAY, analysts=("news", "market"), debate_rounds=2, risk_rounds=3,
    quick_model="openai/gpt-4o-mini", deep_model="anthropic/claude-sonnet-4", temperature=0.2,
    output_language="Deutsch", vendors={"news": ("alpha_vantage", "yfinance")},
    tool_vendors={"get_news": ("alpha_vantage",)}, data_dir="/tmp/ta", max_tool_calls=4,
    holding_days=10, benchmark="^gspc", token_budget=200_000, cost_budget_usd=2.5,
    llm_max_retries=2, llm_timeout_s=30.0, offline_latency_s=0.01)
SNAPSHOT = MarketSnapshot(
    symbol="NVDA", trade_date=DAY,
    last_bar=Bar(date=dt.date(2024, 5, 9), open=887.0, high=904.63, low=881.6, close=887.47,
                 volume=41_510_000.0),
    indicators={"rsi_14": 56.3125, "macd": 4.87, "boll_ub": None},
    recent_closes=[(dt.date(2024, 5, 8), 904.12), (dt.date(2024, 5, 9), 887.47)],
    vendor="yfinance")
CALL = ToolCall(id="call_1", name="get_stock_data",
                arguments={"symbol": "NVDA", "start": "2024-04-10", "look_back": 30})
MESSAGES = [
    Message(role="system", content="You are the market analyst. Réponds en français ✓."),
    Message(role="user", content="Analyse NVDA for 2024-05-10."),
    Message(role="assistant", content="", tool_calls=[CALL]),
    Message(role="tool", content="date,close\n2024-05-09,887.47", tool_call_id="call_1",
            name="get_stock_data"),
]
TRIES = [Attempt(number=1, error="rate limited", status=429, waited_s=1.5), Attempt(number=2)]


def samples() -> dict[str, d.DomainEvent]:
    """One realistic instance per event type, every optional field filled."""
    items = [
        d.RunRequested(run_id="run-20240510-nvda-1a2b", config=CONFIG),
        d.RunResumed(reason="crash recovery", token_budget=300_000, cost_budget_usd=4.0),
        d.RunCompleted(rating=Rating.OVERWEIGHT),
        d.RunFailed(kind="llm", reason="model refused 3 times", role="trader"),
        d.InstrumentResolved(instrument=Instrument(
            ticker="NVDA", symbol="NVDA", name="NVIDIA Corporation", sector="Technology",
            industry="Semiconductors", exchange="NMS", currency="USD", vendor="yfinance",
            available=True, note="resolved from cache")),
        d.MarketSnapshotTaken(snapshot=SNAPSHOT, note="last bar is the day before"),
        d.PastContextLoaded(text="2024-04-10 NVDA Buy: alpha +3.1%", entries=3),
        d.TurnAssigned(turn_id="run-1/bull/2", role="bull", round=2),
        d.LLMCallCompleted(
            turn_id="run-1/market/1", role="market", call_index=2, tier="quick",
            model="openai/gpt-4o-mini", provider="openai", messages=MESSAGES,
            response_text="## Market report\n" + "Momentum is positive. " * 50,
            tool_calls=[CALL], structured={"recommendation": "Buy", "levels": [880.0, 905.5]},
            output_mode="tool", input_tokens=1834, output_tokens=412, cost_usd=0.000521,
            latency_ms=2310.5, attempts=TRIES),
        d.LLMCallFailed(turn_id="run-1/news/1", role="news", call_index=1,
                        model="openai/gpt-4o", error="timeout after 30 s", attempts=TRIES),
        d.ToolCallCompleted(turn_id="run-1/market/1", role="market", call_id="call_1",
                            tool="get_stock_data", arguments=dict(CALL.arguments),
                            result=ToolResult(status="ok", text="date,close\n...",
                                              vendor="yfinance"), latency_ms=41.2),
        d.ToolCapReached(turn_id="run-1/news/1", role="news", cap=6),
        d.AnalystReportSubmitted(turn_id="run-1/fundamentals/1", analyst="fundamentals",
                                 report="| metric | value |\n|---|---|\n| P/E | 71.2 |"),
        d.DebateArgumentMade(turn_id="run-1/bear/1", speaker="bear", round=1,
                             argument="Valuation leaves no room for error."),
        d.InvestmentPlanIssued(turn_id="run-1/research_manager/1", output_mode="structured",
                               plan=ResearchPlan(recommendation=Rating.BUY, rationale="AI capex",
                                                 strategic_actions="Scale in over 2 weeks")),
        d.TradeProposed(turn_id="run-1/trader/1", output_mode="freetext",
                        proposal=TradeProposal(action=TraderAction.BUY, reasoning="trend",
                                               entry_price=885.5, stop_loss=842.0,
                                               position_sizing="2% of portfolio")),
        d.RiskArgumentMade(turn_id="run-1/neutral/2", speaker="neutral", round=2,
                           argument="Trim size; keep the stop."),
        d.PortfolioDecisionIssued(
            turn_id="run-1/portfolio_manager/1", output_mode="tool",
            decision=PortfolioDecision(rating=Rating.UNDERWEIGHT, executive_summary="Too hot",
                                       investment_thesis="Mean reversion", price_target=812.25,
                                       time_horizon="3 months")),
        d.GroundingChecked(turn_id="run-1/bull/1", role="bull", model="openai/gpt-4.1-mini",
                           grounded=12, derived=2, sources={"MarketSnapshotTaken": 12},
                           flagged=[("2024-12-04", "look_ahead"), ("$22.6B", "ungrounded")]),
        d.OutcomeResolved(run_id="run-1", ticker="NVDA", trade_date=DAY, rating=Rating.SELL,
                          raw_return=-0.0213, benchmark="SPY", benchmark_return=0.0042,
                          alpha=-0.0255, holding_days=5, resolved_on=dt.date(2024, 5, 17)),
        d.ReflectionRecorded(run_id="run-1", ticker="NVDA", trade_date=DAY,
                             reflection="The bear was right about valuation.",
                             model="anthropic/claude-sonnet-4"),
        d.RunDriven(owner="worker-1/4f2a9c", node="a1b2c3"),
        d.BacktestRequested(backtest_id="backtest-2024-05-10-1a2b3c4d", configs=[CONFIG],
                            dates=[DAY, dt.date(2024, 5, 17)], bearish="flat"),
        d.BacktestRunStarted(run_id="run-1", ticker="NVDA", trade_date=DAY),
        d.BacktestCompleted(runs=2, completed=2, resolved=1, scorecard=[TickerScore(
            ticker="NVDA", decisions=2, resolved=1, ratings={"Buy": 1, "Hold": 1}, hold_rate=0.5,
            hit_rate=1.0, mean_alpha_long=0.012, mean_raw_return=0.02, by_rating=[RatingScore(
                rating=Rating.BUY, decisions=1, resolved=1, hit_rate=1.0, mean_alpha=0.012)],
            bearish="flat", policy_return=0.02, buy_hold_return=0.02, benchmark="SPY",
            benchmark_return=0.008)]),
    ]
    return {event.type: event for event in items}


def test_every_event_type_has_a_sample():
    """Fails when an event type is added to the union without a round-trip sample here."""
    assert sorted(samples()) == sorted(d.EVENT_TYPES)


def test_every_event_type_round_trips_through_the_codec():
    for type_, event in samples().items():
        stored_type, version, text = encode(event)
        assert (stored_type, version) == (type_, type(event).SCHEMA_VERSION)
        back = decode(stored_type, version, text)
        assert type(back) is type(event)
        assert back == event


@pytest.fixture(params=["memory", "duckdb"])
def reopened(request, tmp_path):
    """Write with one store object, read back with a fresh one (a real reopen for DuckDB)."""
    if request.param == "memory":
        store = InMemoryEventStore()
        yield store, lambda: store
        return
    path = tmp_path / "rt.duckdb"
    opened = [DuckDBEventStore(path)]

    def reopen():
        opened[0].close()
        opened.append(DuckDBEventStore(path, read_only=True))
        return opened[-1]
    yield opened[0], reopen
    opened[-1].close()


def test_every_event_type_round_trips_through_the_store(reopened):
    store, reopen = reopened
    originals = list(samples().values())
    store.append("run-1", [NewEvent(e, actor=f"actor-{e.type}") for e in originals])
    back = reopen().read_stream("run-1")
    assert [type(e.payload) for e in back] == [type(e) for e in originals]
    assert [e.payload for e in back] == originals
    assert [e.actor for e in back] == [f"actor-{e.type}" for e in originals]
    # nested values keep their exact Python types (tuples, dates, enums), not just equality
    run = back[0].payload
    assert run.config.analysts == ("market", "news")
    assert run.config.vendors["news"] == ("alpha_vantage", "yfinance")
    snap = back[5].payload.snapshot
    assert snap.recent_closes[0] == (dt.date(2024, 5, 8), 904.12)
    assert type(snap.recent_closes[0]) is tuple
    assert back[8].payload.messages[2].tool_calls[0] == CALL
    assert back[2].payload.rating is Rating.OVERWEIGHT
