"""Pure projections: budgets in the run state, feeding one by one equals folding at once."""
from __future__ import annotations

import datetime as dt

from events import domain as d
from events.config import RunConfig
from events.records import Message
from projections.run_state import project
from projections.timeline import SUMMARIES

CONFIG = RunConfig(ticker="NVDA", trade_date=dt.date(2024, 5, 10), cost_budget_usd=0.05,
                   token_budget=10_000)


def call(i: int, cost: float, tokens: int) -> d.LLMCallCompleted:
    return d.LLMCallCompleted(turn_id="analyst:market", role="market", call_index=i,
                              tier="quick", model="openai/x", provider="openai",
                              messages=[Message(role="user", content="hi")], response_text="ok",
                              input_tokens=tokens, output_tokens=0, cost_usd=cost)


def test_cost_and_token_budgets_and_a_resume_that_raises_them():
    events = [d.RunRequested(run_id="r", config=CONFIG), call(0, 0.03, 4_000)]
    assert project(events).budget_exceeded() is None
    events.append(call(1, 0.03, 4_000))
    assert project(events).budget_exceeded() == "cost budget $0.0500 reached ($0.0600 used)"
    events.append(d.RunResumed(cost_budget_usd=1.0))
    assert project(events).budget_exceeded() is None
    events.append(call(2, 0.01, 4_000))
    assert project(events).budget_exceeded() == "token budget 10,000 reached (12,000 used)"
    events.append(d.RunResumed(token_budget=100_000))
    state = project(events)
    assert state.budget_exceeded() is None and state.usage.llm_calls == 3
    assert abs(state.usage.cost_usd - 0.07) < 1e-12


def test_one_by_one_equals_all_at_once():
    events = [d.RunRequested(run_id="r", config=CONFIG), call(0, 0.01, 10),
              d.TurnAssigned(turn_id="analyst:market", role="market"),
              d.AnalystReportSubmitted(turn_id="analyst:market", analyst="market", report="r"),
              d.RunFailed(kind="budget", reason="b")]
    stepwise = None
    for e in events:
        stepwise = project([e], stepwise)
    assert stepwise == project(events)


def test_every_event_type_has_a_timeline_summary():
    assert set(SUMMARIES) == set(d.EVENT_TYPES)
