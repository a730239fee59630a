"""The offline provider through the gateway: tool loop, grounded reports, the rating rule."""
from __future__ import annotations

import asyncio
import datetime as dt
import re
import time

import pytest

from events.decisions import PortfolioDecision, ResearchPlan, TradeProposal
from events.records import Bar, MarketSnapshot, Message, ToolSpec
from providers.base import LLMRequest
from providers.gateway import LLMGateway

LABEL = "[offline model: deterministic, not an LLM]"
DAY = dt.date(2024, 5, 10)


def snapshot(close=100.0, sma50=90.0, sma200=80.0, macdh=0.5, rsi=55.0, atr=2.5):
    return MarketSnapshot(
        symbol="NVDA", trade_date=DAY, vendor="test",
        last_bar=Bar(date=DAY, open=99.0, high=101.5, low=98.25, close=close, volume=1_234_567),
        indicators={"close_50_sma": sma50, "close_200_sma": sma200, "rsi": rsi,
                    "macdh": macdh, "atr": atr, "boll_ub": None},
        recent_closes=[(DAY - dt.timedelta(days=1), 98.76), (DAY, close)])


def prompt(snap: MarketSnapshot | None, extra: str = "") -> Message:
    body = "Ticker: NVDA\nTrade date: 2024-05-10\n\n"
    if snap is not None:
        body += snap.render() + "\n\n"
    return Message(role="user", content=body + extra)


def ask(role, messages, **kw) -> object:
    request = LLMRequest(model=kw.pop("model", "offline/quick"), messages=messages, role=role,
                         **kw)
    return asyncio.run(LLMGateway().complete(request))


TOOLS = [
    ToolSpec(name="get_stock_data", description="OHLCV", parameters={
        "type": "object", "required": ["symbol", "start_date", "end_date"], "properties": {
            "symbol": {"type": "string"}, "start_date": {"type": "string"},
            "end_date": {"type": "string"}}}),
    ToolSpec(name="get_indicators", description="one indicator", parameters={
        "type": "object", "required": ["symbol", "indicator", "curr_date"], "properties": {
            "symbol": {"type": "string"}, "indicator": {"type": "string"},
            "curr_date": {"type": "string"}, "look_back_days": {"type": "integer"}}}),
    ToolSpec(name="get_balance_sheet", description="statements", parameters={
        "type": "object", "required": ["ticker"], "properties": {
            "ticker": {"type": "string"}, "freq": {"type": "string"},
            "curr_date": {"type": "string"}}}),
    ToolSpec(name="get_news", description="news", parameters={
        "type": "object", "required": ["ticker", "start_date", "end_date"], "properties": {
            "ticker": {"type": "string"}, "start_date": {"type": "string"},
            "end_date": {"type": "string"}}}),
]


def test_analyst_first_asks_for_tools_with_prompt_arguments():
    reply = ask("market", [prompt(snapshot())], tools=TOOLS)
    assert LABEL in reply.text
    by_name = {}
    for call in reply.tool_calls:
        by_name.setdefault(call.name, []).append(call.arguments)
    assert by_name["get_stock_data"] == [
        {"symbol": "NVDA", "start_date": "2024-04-10", "end_date": "2024-05-10"}]
    indicators = [a["indicator"] for a in by_name["get_indicators"]]
    assert indicators == ["close_50_sma", "close_200_sma", "rsi", "macd", "macdh", "boll_ub",
                          "boll_lb", "atr"]
    assert all(a["curr_date"] == "2024-05-10" for a in by_name["get_indicators"])
    assert by_name["get_balance_sheet"][0]["freq"] == "quarterly"
    assert len({c.id for c in reply.tool_calls}) == len(reply.tool_calls)
    assert reply.structured is None and reply.output_mode == "freetext"


def _tool_round(snap):
    first = prompt(snap)
    asked = ask("market", [first], tools=TOOLS)
    results = {"get_stock_data": "date,open,high,low,close\n2024-05-09,97.10,99.30,96.80,98.76"
                                 "\n2024-05-10,99.00,101.50,98.25,100.00",
               "get_balance_sheet": "Error: vendor timed out",
               "get_news": "NO_DATA_AVAILABLE: no vendor had news for NVDA; do not invent any."}
    messages = [first, Message(role="assistant", tool_calls=asked.tool_calls)]
    for call in asked.tool_calls:
        content = results.get(call.name) or (
            f"## {call.arguments['indicator']} values\n2024-05-09: 61.2345\n2024-05-10: 63.4567")
        messages.append(Message(role="tool", tool_call_id=call.id, name=call.name,
                                content=content))
    return messages


def test_report_quotes_real_numbers_names_gaps_and_invents_none():
    messages = _tool_round(snapshot())
    reply = ask("market", messages, tools=TOOLS)
    report = reply.text
    assert reply.tool_calls == [] and report.startswith(LABEL)
    assert "63.4567" in report and "2024-05-10,99.00,101.50,98.25,100.00" in report
    assert "get_news" in report and "NO_DATA_AVAILABLE" in report
    assert "ERROR" in report and "get_balance_sheet" in report
    assert "| Item | Value | Source |" in report  # ends with the summary table
    given = "\n".join(m.content for m in messages)
    invented = [n for n in re.findall(r"\d+\.\d+", report) if n not in given]
    assert invented == []


def test_report_without_tools_or_snapshot_says_so():
    reply = ask("news", [prompt(None)])
    assert "No verified price figures" in reply.text and "Hold (score +0)" in reply.text
    assert re.findall(r"\d+\.\d+", reply.text) == []


@pytest.mark.parametrize("snap,expected", [
    (snapshot(close=100, sma50=90, sma200=80, macdh=0.5, rsi=55), "Buy"),           # +3
    (snapshot(close=100, sma50=90, sma200=80, macdh=0.5, rsi=25), "Buy"),           # +4
    (snapshot(close=100, sma50=90, sma200=80, macdh=-0.5, rsi=55), "Overweight"),   # +1
    (snapshot(close=100, sma50=90, sma200=95, macdh=0.5, rsi=75), "Hold"),          # 0
    (snapshot(close=85, sma50=90, sma200=80, macdh=-0.5, rsi=55), "Underweight"),   # -1
    (snapshot(close=85, sma50=90, sma200=95, macdh=-0.5, rsi=75), "Sell"),          # -4
    (None, "Hold"),
])
def test_rating_rule_for_every_tier(snap, expected):
    messages = [prompt(snap)]
    plan = ask("research_manager", messages, output_schema="ResearchPlan", tier="deep")
    decision = ask("portfolio_manager", messages, output_schema="PortfolioDecision")
    assert plan.output_mode == decision.output_mode == "structured"
    assert ResearchPlan.model_validate(plan.structured).recommendation.value == expected
    assert PortfolioDecision.model_validate(decision.structured).rating.value == expected
    assert f"**Rating**: {expected}" in decision.text and LABEL in decision.text


@pytest.mark.parametrize("snap,action,stop", [
    (snapshot(close=100, atr=2.5), "Buy", 95.0),
    (snapshot(close=85, sma50=90, sma200=95, macdh=-0.5, rsi=75, atr=1.5), "Sell", 88.0),
    (snapshot(close=100, sma50=90, sma200=95, macdh=0.5, rsi=75), "Hold", None),
])
def test_trader_entry_and_atr_stop(snap, action, stop):
    reply = ask("trader", [prompt(snap)], output_schema="TradeProposal")
    proposal = TradeProposal.model_validate(reply.structured)
    assert proposal.action.value == action
    assert proposal.stop_loss == stop
    assert proposal.entry_price == (None if action == "Hold" else snap.last_bar.close)
    assert f"FINAL TRANSACTION PROPOSAL: **{action.upper()}**" in reply.text


def test_later_roles_find_figures_quoted_by_earlier_ones():
    """The trader often sees only the plan; the plan quotes the figures, so the rule holds."""
    plan = ask("research_manager", [prompt(snapshot(close=85, sma50=90, sma200=95,
                                                    macdh=-0.5, rsi=75))],
               output_schema="ResearchPlan")
    trade = ask("trader", [Message(role="user", content="Ticker: NVDA\n\n" + plan.text)],
                output_schema="TradeProposal")
    assert trade.structured["action"] == "Sell"


def test_debaters_argue_from_numbers_and_rebut():
    snap = snapshot()
    bull = ask("bull", [prompt(snap)])
    assert bull.text.startswith("Bull Analyst:") and "90.0000" in bull.text
    bear = ask("bear", [prompt(snap, "Bull Analyst: " + bull.text)])
    assert bear.text.startswith("Bear Analyst:") and "Answering the Bull Analyst" in bear.text
    risk = ask("conservative", [prompt(snap, "**Entry Price**: 100.00\n\nFINAL TRANSACTION "
                                             "PROPOSAL: **BUY**\n\nAggressive Analyst: Go all "
                                             "in now. It is cheap.")])
    assert risk.text.startswith("Conservative Analyst:")
    assert "Go all in now." in risk.text and "Buy, entry price 100.00" in risk.text


def test_reflector_writes_two_to_four_sentences():
    reply = ask("reflector", [Message(role="user", content=(
        "Ticker: NVDA\nRaw return: +3.20%\nAlpha vs SPY: -1.10%\nDecision: **Rating**: Buy"))])
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", reply.text.replace(LABEL, "")) if s]
    assert 2 <= len(sentences) <= 4
    assert "+3.20%" in reply.text and "-1.10%" in reply.text and "Buy" in reply.text


def test_deterministic_tokens_cost_and_usage():
    gateway = LLMGateway()
    request = LLMRequest(model="offline/deep", messages=[prompt(snapshot())],
                         role="portfolio_manager", output_schema="PortfolioDecision")
    first, second = (asyncio.run(gateway.complete(request)) for _ in range(2))
    assert first.text == second.text and first.structured == second.structured
    prompt_chars = len(request.messages[0].content)
    assert first.input_tokens == -(-prompt_chars // 4) and first.output_tokens > 0
    assert first.cost_usd == 0.0 and first.provider == "offline"
    usage = gateway.usage()["offline/deep"]
    assert usage["calls"] == 2 and usage["input_tokens"] == 2 * first.input_tokens


def test_latency_is_slept_concurrently():
    gateway = LLMGateway()
    request = LLMRequest(model="offline/quick", messages=[prompt(snapshot())], role="bull",
                         offline_latency_s=0.3)

    async def many():
        return await asyncio.gather(*(gateway.complete(request) for _ in range(8)))

    started = time.perf_counter()
    replies = asyncio.run(many())
    elapsed = time.perf_counter() - started
    assert all(r.latency_ms >= 300 for r in replies)
    assert elapsed < 1.5  # eight 0.3 s calls overlap
    assert gateway.peak_in_flight["offline"] == 8


def test_one_gateway_serves_successive_event_loops():
    gateway = LLMGateway(concurrency_per_provider={"offline": 1})
    request = LLMRequest(model="offline/quick", messages=[prompt(None)], role="bull",
                         offline_latency_s=0.05)

    async def pair():
        return await asyncio.gather(gateway.complete(request), gateway.complete(request))

    for _ in range(2):  # contention on a semaphore from a loop that is gone must not fail
        assert len(asyncio.run(pair())) == 2
    assert gateway.peak_in_flight["offline"] == 1
