"""Prompts that fit a small context window (providers/fitting.py, actors/prompts.py): the
token estimate, the condensing ladder, and the prompts it condenses. Pure tests."""
from __future__ import annotations

import datetime as dt

from actors import prompts
from events import domain as d
from events.config import RunConfig
from events.records import Bar, Instrument, MarketSnapshot, Message, ToolResult
from projections.run_state import project
from providers.fitting import (CHARS_PER_TOKEN, LADDER, Condensing, estimate_tokens, first_sentence,
                               fit, reply_reserve, trim_rows, trim_tool_messages)

DAY = dt.date(2024, 6, 14)
SNAPSHOT = MarketSnapshot(
    symbol="MSFT", trade_date=DAY, last_bar=Bar(date=DAY, open=440.0, high=443.5, low=439.1,
                                                close=442.57, volume=15_000_000),
    indicators={"rsi": 61.25, "close_50_sma": 425.1}, vendor="local",
    recent_closes=[(DAY - dt.timedelta(days=i), 440.0 + i) for i in range(10)])
LONG = " ".join(f"Point {i} is that the trend holds with volume confirming it." for i in range(60))


def state(speeches: int = 6):
    """A run in its risk debate: four long reports, a long bull/bear debate so far."""
    config = RunConfig(ticker="MSFT", trade_date=DAY, quick_model="openai/smollm2-135m",
                       deep_model="openai/smollm2-135m")
    events: list = [d.RunRequested(run_id="r", config=config),
                    d.InstrumentResolved(instrument=Instrument(ticker="MSFT", symbol="MSFT")),
                    d.MarketSnapshotTaken(snapshot=SNAPSHOT, note="ok"),
                    d.PastContextLoaded(text="", entries=0)]
    for analyst in config.analysts:
        events += [d.TurnAssigned(turn_id=f"t-{analyst}", role=analyst, round=1),
                   d.AnalystReportSubmitted(turn_id=f"t-{analyst}", analyst=analyst,
                                            report=f"{analyst.title()} opening sentence. {LONG}")]
    for i in range(speeches):
        role, rnd = ("bull", "bear")[i % 2], i // 2 + 1
        events += [d.TurnAssigned(turn_id=f"t-debate-{i}", role=role, round=rnd),
                   d.DebateArgumentMade(turn_id=f"t-debate-{i}", speaker=role, round=rnd,
                                        argument=f"Turn {i} claim. {LONG}")]
    return project(events)


def test_estimate_is_conservative_and_counts_tools_and_messages():
    text = "x" * 3000
    assert estimate_tokens([Message(role="user", content=text)]) == 3000 / CHARS_PER_TOKEN + 8
    assert CHARS_PER_TOKEN < 4  # numbers tokenize worse than prose: never optimistic
    assert reply_reserve(4096) == 256 and reply_reserve(131_072) == 4096


def test_first_sentence_and_trim_rows():
    assert first_sentence("Momentum is up. Volume confirms it.") == "Momentum is up. […]"
    assert first_sentence("One sentence only.") == "One sentence only."
    bars = "\n".join(["# MSFT daily bars", "date,open,high,low,close,volume"]
                     + [f"2024-06-{d:02d},1,2,0.5,1.5,100" for d in range(1, 15)])
    trimmed = trim_rows(bars, 3)
    lines = trimmed.splitlines()
    assert lines[:2] == ["# MSFT daily bars", "date,open,high,low,close,volume"]
    assert "11 older rows cut" in lines[2]
    assert lines[3:] == ["2024-06-12,1,2,0.5,1.5,100", "2024-06-13,1,2,0.5,1.5,100",
                         "2024-06-14,1,2,0.5,1.5,100"]  # the newest rows stay
    assert trim_rows(bars, 50) == bars


def test_a_prompt_that_fits_is_sent_whole():
    s = state(speeches=2)
    fitted = fit(lambda level: [Message(role="user", content=prompts.user_message(
        "bull", s, level))], budget=100_000)
    assert fitted is not None and fitted.level == LADDER[0] and fitted.level.describe() == []


def test_condensing_keeps_the_snapshot_and_cuts_oldest_turns_first():
    s = state(speeches=6)
    whole = prompts.user_message("bull", s)

    def build(level: Condensing) -> list[Message]:
        return [Message(role="system", content=prompts.SYSTEM["bull"]),
                Message(role="user", content=prompts.user_message("bull", s, level))]

    budget = estimate_tokens(build(LADDER[0])) // 3
    fitted = fit(build, budget=budget)
    assert fitted is not None and fitted.tokens <= budget < estimate_tokens(build(LADDER[0]))
    sent = fitted.messages[1].content
    assert SNAPSHOT.render() in sent and SNAPSHOT.render() in whole  # never cut
    assert sent.endswith("Make your next argument as the bull.")  # the task is never cut
    # the oldest turn became its first sentence; the newest keeps at least its first
    assert "Turn 0 claim. […]" in sent and "Turn 5 claim." in sent
    mild = prompts.user_message("bull", s, Condensing(whole_speeches=1))
    assert "Turn 0 claim. […]" in mild and f"Turn 5 claim. {LONG}" in mild  # newest whole
    assert fitted.level.describe()  # what was cut, for the event
    # deterministic: the same state and budget give the same prompt
    again = fit(build, budget=budget)
    assert again is not None and again.messages == fitted.messages


def test_nothing_fits_means_nothing_is_sent():
    s = state()
    assert fit(lambda level: [Message(role="user", content=prompts.user_message(
        "bull", s, level))], budget=50) is None


def test_tool_results_keep_their_newest_rows():
    rows = "\n".join(["# rsi for MSFT"] + [f"2024-05-{d:02d}: {50 + d}" for d in range(1, 31)])
    messages = [Message(role="user", content="task"),
                Message(role="tool", content=rows, tool_call_id="c1", name="get_indicators")]
    cut = trim_tool_messages(messages, Condensing(tool_rows=5))
    assert cut[0] == messages[0]
    assert cut[1].content.splitlines()[-1] == "2024-05-30: 80"
    assert len(cut[1].content.splitlines()) == 1 + 1 + 5
    block = prompts.tool_results_block(
        [("get_indicators", {"indicator": "rsi"}, ToolResult(status="ok", text=rows))],
        Condensing(tool_rows=2))
    assert "2024-05-30: 80" in block and "2024-05-01: 51" not in block


def test_the_portfolio_managers_prompt_cuts_plan_proposal_and_risk_debate():
    """The deciding roles read the plan and the proposal whole; under a small window they
    keep their first sentences (a real run at 2,048 tokens needs it), the snapshot stays."""
    from events.decisions import ResearchPlan, TradeProposal
    s = state(speeches=2)
    events = [
        d.TurnAssigned(turn_id="t-rm", role="research_manager", round=1),
        d.InvestmentPlanIssued(turn_id="t-rm", output_mode="structured", plan=ResearchPlan(
            recommendation="Buy", rationale=f"Plan first sentence. {LONG}",
            strategic_actions=LONG)),
        d.TurnAssigned(turn_id="t-tr", role="trader", round=1),
        d.TradeProposed(turn_id="t-tr", output_mode="structured", proposal=TradeProposal(
            action="Buy", reasoning=f"Proposal first sentence. {LONG}"))]
    for i, role in enumerate(("aggressive", "conservative", "neutral")):
        events += [d.TurnAssigned(turn_id=f"t-risk-{i}", role=role, round=1),
                   d.RiskArgumentMade(turn_id=f"t-risk-{i}", speaker=role, round=1,
                                      argument=f"Risk turn {i}. {LONG}")]
    s = project(events, s)

    def build(level: Condensing) -> list[Message]:
        return [Message(role="system", content=prompts.SYSTEM["portfolio_manager"]),
                Message(role="user", content=prompts.user_message("portfolio_manager", s,
                                                                  level))]

    whole = estimate_tokens(build(LADDER[0]))
    fitted = fit(build, budget=whole // 4)
    assert fitted is not None and fitted.level.report_chars is not None
    sent = fitted.messages[1].content
    assert SNAPSHOT.render() in sent and sent.rstrip().endswith(prompts.RATING_LINE)
    assert "Plan first sentence." in sent and LONG not in sent
    assert "the plan, the proposal" in " ".join(fitted.level.describe())
