"""The offline provider: a deterministic stand-in for an LLM, grounded in the prompt's data.

Why it exists: this workplace (and CI, and a first-time user without keys) has no hosted
model, yet every actor, event and projection must run end to end. The offline model answers
each role from the data it is given and nothing else, and every reply text carries the label
``[offline model: deterministic, not an LLM]`` so its output is never mistaken for analysis.

Behaviour by ``request.role``:

* analysts (market, social, news, fundamentals): when tools are offered and no tool result is
  in the messages yet, it asks for every offered tool with arguments taken from the prompt's
  ``Ticker:`` and ``Trade date:`` lines (start dates 30 days back; one get_indicators call
  per indicator). Then it writes a markdown report that quotes the tool results and the
  verified snapshot verbatim, names every tool that returned NO_DATA_AVAILABLE or an error,
  and ends with a summary table. The social analyst's report ends with a labelled line
  "Sentiment: <band>, score <0-10>, confidence <level>" from the posts' mood tags
  (``offline_text.sentiment_reading``), which the structured sentiment report is read from;
  asked for the SentimentReport schema directly, it returns the same reading.
* bull / bear / aggressive / conservative / neutral: an argument built from the snapshot
  figures, answering the opponent's last argument when there is one.
* research_manager / trader / portfolio_manager (or any request with ``output_schema``): the
  decision from the rating rule documented in ``providers.offline_facts``:
  score = (+1 if close > close_50_sma else -1) + (+1 if close_50_sma > close_200_sma else -1)
  + (+1 if macdh > 0 else -1) + (-1 if rsi > 70, +1 if rsi < 30, else 0);
  >=3 Buy, 1..2 Overweight, 0 Hold, -1..-2 Underweight, <=-3 Sell; no snapshot -> Hold.
  The trader acts Buy for Buy/Overweight and Sell for Sell/Underweight, enters at the last
  close, and stops at close - 2*atr (buys) or close + 2*atr (sells).
* reflector: three or four sentences on the rating stated on the prompt's ``Rating:`` line,
  its ``Thesis:``, the raw return and the alpha: right or wrong by
  events.rating.call_was_right, and a lesson for that rating and verdict.

Tokens are estimated as characters / 4; cost is 0; ``offline_latency_s`` is slept to let
benchmarks model a slow provider.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import math
import re
import time

from events.decisions import (DECISION_SCHEMAS, Decision, PortfolioDecision, ResearchPlan,
                              SentimentReport, TradeProposal)
from events.rating import (Rating, TraderAction, call_was_right, parse_action, parse_rating,
                           rating_to_action)
from events.records import Attempt, ToolCall, ToolSpec
from events.roles import DECISION_OF_ROLE
from providers.base import LLMError, LLMReply, LLMRequest
from providers.offline_facts import RULE_TEXT, Facts, figure_lines, rating_for, read_facts
from providers.offline_text import (ANALYST_TITLES, LABEL, SPEAKERS, analyst_report,
                                    debate_argument, sentiment_reading)

INDICATORS = ("close_50_sma", "close_200_sma", "rsi", "macd", "macdh", "boll_ub", "boll_lb",
              "atr")
_DECIDERS = DECISION_OF_ROLE  # structured decision each deciding role returns
_SYMBOL_ARGS = {"symbol", "ticker", "ticker_symbol", "company", "query", "stock"}
_END_ARGS = {"curr_date", "end_date", "end", "date", "trade_date", "as_of"}
_START_ARGS = {"start_date", "start", "begin_date"}
_FIXED_ARGS = {"freq": "quarterly", "frequency": "quarterly", "look_back_days": 30,
               "limit": 10}


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


async def complete(request: LLMRequest) -> LLMReply:
    started = time.perf_counter()
    if request.offline_latency_s > 0:
        await asyncio.sleep(request.offline_latency_s)
    facts = read_facts(request.messages)
    tool_calls: list[ToolCall] = []
    structured: dict | None = None
    schema = request.output_schema or None
    if schema is not None and schema not in DECISION_SCHEMAS:
        raise LLMError(f"unknown output schema {schema!r}", "config")
    if schema or request.role in _DECIDERS:
        structured = decide(schema or _DECIDERS[request.role], facts)
        text = f"{LABEL}\n\n" + DECISION_SCHEMAS[schema or _DECIDERS[request.role]] \
            .model_validate(structured).render()
        if not schema:
            structured = None
    elif request.tools and not any(m.role == "tool" for m in request.messages):
        tool_calls = plan_tool_calls(request.role, request.tools, facts)
        text = f"{LABEL} requesting {len(tool_calls)} tool call(s)"
    elif request.role == "reflector":
        text = reflect(facts)
    elif request.role in SPEAKERS:
        text = debate_argument(request.role, facts, proposal=_proposal(facts))
    else:  # the four analysts, and any role we do not know: a grounded report
        text = analyst_report(request.role if request.role in ANALYST_TITLES else "market",
                              facts)
    prompt_chars = sum(len(m.content) for m in request.messages)
    out_chars = len(text) + sum(len(str(c.arguments)) for c in tool_calls)
    return LLMReply(
        text=text, tool_calls=tool_calls, structured=structured,
        output_mode="structured" if structured is not None else "freetext",
        input_tokens=math.ceil(prompt_chars / 4), output_tokens=math.ceil(out_chars / 4),
        cost_usd=0.0, latency_ms=(time.perf_counter() - started) * 1000,
        attempts=[Attempt(number=1)], provider="offline", model=request.model)


def _argument_value(name: str, spec: dict, facts: Facts):
    day = facts.trade_date or dt.date.today()
    if name in _SYMBOL_ARGS:
        return facts.ticker
    if name in _END_ARGS:
        return day.isoformat()
    if name in _START_ARGS:
        return (day - dt.timedelta(days=30)).isoformat()
    if name in _FIXED_ARGS:
        return _FIXED_ARGS[name]
    if "default" in spec:
        return spec["default"]
    if spec.get("enum"):
        return spec["enum"][0]
    return None


def plan_tool_calls(role: str, tools: list[ToolSpec], facts: Facts) -> list[ToolCall]:
    """One call per offered tool (one per indicator for indicator tools), deterministic ids."""
    calls: list[ToolCall] = []
    for tool in tools:
        props = tool.parameters.get("properties", {}) or {}
        base = {}
        for name, spec in props.items():
            value = _argument_value(name, spec or {}, facts)
            if value is not None:
                base[name] = value
        variants = [base]
        if "indicator" in props:
            allowed = (props["indicator"] or {}).get("enum")
            names = [i for i in INDICATORS if not allowed or i in allowed]
            variants = [{**base, "indicator": name} for name in names]
        for args in variants:
            suffix = f"_{args['indicator']}" if "indicator" in args else ""
            calls.append(ToolCall(id=f"call_{role}_{len(calls) + 1}_{tool.name}{suffix}",
                                  name=tool.name, arguments=args))
    return calls


def _proposal(facts: Facts) -> str | None:
    """The trader's proposal as one line, read from the rendered TradeProposal in the prompt."""
    marker = facts.text.rfind("FINAL TRANSACTION PROPOSAL")
    if marker < 0:
        return None
    action = parse_action(facts.text[marker:]).value
    parts = [action]
    for label in ("Entry Price", "Stop Loss", "Position Sizing"):
        found = re.findall(rf"\*\*{label}\*\*:\s*([^\n]+)", facts.text[:marker])
        if found:
            parts.append(f"{label.lower()} {found[-1].strip()}")
    return ", ".join(parts)


def decide(schema: str, facts: Facts) -> dict:
    """The decision object for ``schema`` from the rating rule (validated, JSON-ready)."""
    rating, total, why = rating_for(facts)
    figures = "\n".join(figure_lines(facts))
    basis = (f"{RULE_TEXT}. Terms: " + "; ".join(why) + f". Score {total:+d} -> {rating.value}."
             + (f"\nVerified figures used:\n{figures}" if figures else ""))
    close, atr = facts.value("close"), facts.value("atr")
    if schema == "ResearchPlan":
        steps = {Rating.BUY: "Build a full position at the market; review if the close falls "
                             "below the 50-day SMA.",
                 Rating.OVERWEIGHT: "Build a partial position and add on confirmation.",
                 Rating.HOLD: "Keep current exposure; wait for the figures to agree.",
                 Rating.UNDERWEIGHT: "Trim exposure; avoid adding until momentum turns.",
                 Rating.SELL: "Exit the position; re-evaluate after a trend change."}[rating]
        obj: Decision = ResearchPlan(recommendation=rating, rationale=basis, strategic_actions=steps)
    elif schema == "TradeProposal":
        action = rating_to_action(rating)
        stop = None
        if close is not None and atr is not None and action != TraderAction.HOLD:
            stop = round(close - 2 * atr if action == TraderAction.BUY else close + 2 * atr, 4)
        sizing = {Rating.BUY: "full position", Rating.OVERWEIGHT: "half position",
                  Rating.UNDERWEIGHT: "half position", Rating.SELL: "full position"}.get(rating)
        obj = TradeProposal(action=action, reasoning=basis,
                            entry_price=close if action != TraderAction.HOLD else None,
                            stop_loss=stop, position_sizing=sizing)
    elif schema == "SentimentReport":
        band, score, confidence = sentiment_reading(facts)
        obj = SentimentReport(band=band, score=score, confidence=confidence,
                              narrative=analyst_report("social", facts))
    elif schema == "PortfolioDecision":
        obj = PortfolioDecision(
            rating=rating, executive_summary=f"{rating.value} {facts.ticker}: the verified "
            f"snapshot figures score {total:+d} under the offline rule.",
            investment_thesis=basis, time_horizon="about one week (5 trading days)")
    else:  # a schema added later: fill it from our own text deterministically
        from providers.structured import from_freetext
        return from_freetext(schema, f"Rating: {rating.value}\n{basis}")
    return obj.model_dump(mode="json")


_PCT = r"([-+]?\d+(?:\.\d+)?\s*%?)"


_STATED_RATING = re.compile(r"(?im)^Rating:\s*\**\s*(\w+)")
_STATED_THESIS = re.compile(r"(?im)^Thesis:\s*(.+)$")


def stated_rating(text: str) -> Rating:
    """The rating the prompt states on its own ``Rating:`` line; else the decision text's."""
    match = _STATED_RATING.search(text)
    if match and match.group(1).capitalize() in Rating.__members__.values():
        return Rating(match.group(1).capitalize())
    section = text[text.find("## The decision"):] if "## The decision" in text else text
    return parse_rating(section)


def reflect(facts: Facts) -> str:
    text = facts.text
    raw = re.search(rf"(?i)raw[ _]?return[^\d+\-\n]*{_PCT}", text)
    alpha = re.search(rf"(?i)\balpha[^\d+\-\n]*{_PCT}", text)
    rating = stated_rating(text)
    thesis = _STATED_THESIS.search(text)
    sentences = [f"{LABEL} The {rating.value} call on {facts.ticker} returned "
                 f"{raw.group(1) if raw else 'an unknown raw return'} with alpha "
                 f"{alpha.group(1) if alpha else 'unknown'} against the benchmark."]
    if thesis:
        gist = re.split(r"(?<=[.!?])\s", " ".join(thesis.group(1).split()))[0].rstrip(".!?")
        sentences.append(f"It rested on the thesis \"{gist[:157] + '…' if len(gist) > 160 else gist}\".")
    if alpha:
        value = float(alpha.group(1).replace("%", "").strip()) / 100
        right = call_was_right(rating, value)
        sentences.append(f"The outcome bore out the {rating.value} call." if right else
                         f"The outcome went against the {rating.value} call.")
        sentences.append(_LESSONS[(rating, right)])
    else:
        sentences.append("Without a measured alpha no lesson about direction is drawn.")
    return " ".join(sentences)


#: The lesson for each (rating, was it right): a table, so every case has its own words.
_LESSONS: dict[tuple[Rating, bool], str] = {
    (Rating.BUY, True): "Lesson: when trend and momentum agree this strongly, a full long "
                        "conviction is earned.",
    (Rating.BUY, False): "Lesson: a full Buy needs momentum confirmed, not just trend; size "
                         "down when they disagree.",
    (Rating.OVERWEIGHT, True): "Lesson: a measured long tilt suited mixed-but-positive "
                               "figures.",
    (Rating.OVERWEIGHT, False): "Lesson: check the benchmark's direction before tilting long "
                                "on mixed figures.",
    (Rating.HOLD, True): "Lesson: the balanced evidence really was balanced; staying flat "
                         "cost nothing.",
    (Rating.HOLD, False): "Lesson: the Hold sat out a real move; look for the figure that "
                          "broke the tie and take a side.",
    (Rating.UNDERWEIGHT, True): "Lesson: a measured short tilt suited weakening figures.",
    (Rating.UNDERWEIGHT, False): "Lesson: weakening figures were not enough to lean short; "
                                 "wait for trend and momentum to agree.",
    (Rating.SELL, True): "Lesson: when trend and momentum both turn down, a full Sell is "
                         "earned.",
    (Rating.SELL, False): "Lesson: a full Sell needs a broken trend, not just stretched "
                          "momentum; size down.",
}
