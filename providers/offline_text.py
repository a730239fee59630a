"""Prose of the offline model: analyst reports and debate arguments built only from what the
prompt contains. Every number in this text is copied verbatim from a tool result or the
verified snapshot; when a source had nothing, the text says so instead of filling the gap."""
from __future__ import annotations

import re

from events.sentiment import Confidence, SentimentBand, band_for_score
from providers.offline_facts import Facts, ToolOutcome, figure_lines, rating_for

LABEL = "[offline model: deterministic, not an LLM]"

ANALYST_TITLES = {"market": "Market / technical analysis", "social": "Social sentiment analysis",
                  "news": "News and macro analysis", "fundamentals": "Fundamentals analysis"}
SPEAKERS = {"bull": "Bull Analyst", "bear": "Bear Analyst", "aggressive": "Aggressive Analyst",
            "conservative": "Conservative Analyst", "neutral": "Neutral Analyst"}
_OPPONENTS = {"bull": ("bear",), "bear": ("bull",), "aggressive": ("conservative", "neutral"),
              "conservative": ("aggressive", "neutral"), "neutral": ("aggressive", "conservative")}


def _quote(text: str, head: int = 3, tail: int = 5) -> list[str]:
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if len(lines) > head + tail + 1:
        lines = lines[:head] + [f"... ({len(lines) - head - tail} lines omitted) ..."] + \
            lines[-tail:]
    return [f"> {ln[:240]}" for ln in lines] or ["> (empty result)"]


def _call_label(tool: ToolOutcome) -> str:
    args = ", ".join(f"{k}={v}" for k, v in tool.arguments.items())
    return f"`{tool.name}({args})`"


def _observations(facts: Facts) -> list[str]:
    """Plain readings of the snapshot figures (only those present)."""
    f, out = facts, []
    close, sma50, sma200 = f.value("close"), f.value("close_50_sma"), f.value("close_200_sma")
    rsi, macdh = f.value("rsi"), f.value("macdh")
    if f.raw("close") and f.raw("close_50_sma") and close is not None and sma50 is not None:
        side = "above" if close > sma50 else "at or below"
        out.append(f"The last close {f.raw('close')} is {side} the 50-day SMA "
                   f"{f.raw('close_50_sma')}.")
    if f.raw("close_50_sma") and f.raw("close_200_sma") and sma50 is not None \
            and sma200 is not None:
        side = "above" if sma50 > sma200 else "at or below"
        out.append(f"The 50-day SMA {f.raw('close_50_sma')} is {side} the 200-day SMA "
                   f"{f.raw('close_200_sma')}.")
    if f.raw("rsi") and rsi is not None:
        zone = ("overbought" if rsi > 70 else "oversold" if rsi < 30
                else "neither overbought nor oversold")
        out.append(f"RSI is {f.raw('rsi')}, {zone}.")
    if f.raw("macdh") and macdh is not None:
        sign = "positive (momentum improving)" if macdh > 0 else \
            "zero or negative (momentum fading)"
        out.append(f"The MACD histogram is {f.raw('macdh')}, {sign}.")
    if f.raw("atr"):
        out.append(f"ATR is {f.raw('atr')}, the typical daily range to size stops with.")
    return out


_MOOD_TAG = re.compile(r"\[(bullish|bearish|neutral)\]", re.IGNORECASE)
#: Tagged posts needed for medium and for high confidence.
_CONFIDENCE_AT = ((15, Confidence.HIGH), (5, Confidence.MEDIUM), (0, Confidence.LOW))


def sentiment_reading(facts: Facts) -> tuple[SentimentBand, float, Confidence]:
    """The offline sentiment rule, on the posts' own mood tags (StockTwits and synthetic
    posts carry them): score = 5 + 5 x (bullish - bearish) / tagged, to the whole point (a
    judgement on a 0-10 scale, not a measured figure), and the band of that score; Mixed when
    bullish and bearish posts are each at least 40% of the tagged ones; no tagged post ->
    Neutral 5."""
    tags = [m.lower() for t in facts.tools if t.name == "get_social_posts" and t.status == "ok"
            for m in _MOOD_TAG.findall(t.content)]
    bull, bear, n = tags.count("bullish"), tags.count("bearish"), len(tags)
    score = float(round(5 + 5 * (bull - bear) / n)) if n else 5.0
    mixed = n > 0 and min(bull, bear) >= 0.4 * n
    band = SentimentBand.MIXED if mixed else band_for_score(score)
    confidence = next(level for at, level in _CONFIDENCE_AT if n >= at)
    return band, score, confidence


def analyst_report(role: str, facts: Facts) -> str:
    title = ANALYST_TITLES.get(role, f"{role.title()} analysis")
    day = facts.trade_date.isoformat() if facts.trade_date else "the trade date"
    out = [LABEL, "", f"# {title}: {facts.ticker} as of {day}", ""]
    ok = [t for t in facts.tools if t.status == "ok"]
    missing = [t for t in facts.tools if t.status != "ok"]
    if facts.tools:
        out += ["## What the data tools returned", ""]
        for tool in facts.tools:
            out.append(f"### {_call_label(tool)}")
            if tool.status == "no_data":
                out.append("NO DATA: this tool returned NO_DATA_AVAILABLE, so nothing from this "
                           "source is used and no figure is assumed in its place.")
            elif tool.status == "error":
                out.append("ERROR: this tool failed; its result is not used. It said:")
            out += _quote(tool.content) + [""]
    else:
        out += ["No data tools were called for this report; it relies on the prompt alone.", ""]
    if facts.snapshot_lines:
        out += ["## Verified market snapshot (quoted)", ""] + _quote("\n".join(
            facts.snapshot_lines), head=12, tail=2) + [""]
    readings = _observations(facts)
    out += ["## Reading", ""]
    out += [f"- {r}" for r in readings] or ["- No verified price figures were available, so "
                                            "this report draws no numeric conclusion."]
    rating, total, _ = rating_for(facts)
    out += ["", "## Summary", "", "| Item | Value | Source |", "|---|---|---|"]
    for line in figure_lines(facts):
        key, value = line.split(": ", 1)
        out.append(f"| {key} | {value} | verified snapshot |")
    out.append(f"| tools with data | {len(ok)} of {len(facts.tools)} | tool results |")
    for tool in missing:
        out.append(f"| {tool.name} | {tool.status.replace('_', ' ')} | tool result |")
    out.append(f"| signal | {rating.value} (score {total:+d}) | offline rule |")
    if role == "social":  # the labelled line the structured report is read from
        band, score, confidence = sentiment_reading(facts)
        out += ["", "Read from the mood tags of the posts above (offline rule).",
                f"Sentiment: {band.value}, score {score:g}, confidence {confidence.value}"]
    return "\n".join(out)


def last_argument(role: str, text: str) -> tuple[str, str] | None:
    """(speaker, first sentence) of the most recent argument by one of ``role``'s opponents."""
    best: tuple[int, str, str] | None = None
    for opponent in _OPPONENTS.get(role, ()):
        speaker = SPEAKERS[opponent]
        pos = text.rfind(f"{speaker}:")
        if pos >= 0 and (best is None or pos > best[0]):
            body = text[pos + len(speaker) + 1:].replace(LABEL, "").strip()
            sentence = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0][:300]
            best = (pos, speaker, sentence)
    return (best[1], best[2]) if best else None


def _data_gaps(facts: Facts) -> int:
    return facts.text.count("NO_DATA_AVAILABLE")


def debate_argument(role: str, facts: Facts, proposal: str | None = None) -> str:
    """An argument for ``role`` (bull/bear/aggressive/conservative/neutral)."""
    speaker = SPEAKERS[role]
    rating, total, why = rating_for(facts)
    readings = _observations(facts)
    positive = [r for r in readings if re.search(r"above|positive|oversold|neither", r)]
    negative = [r for r in readings if r not in positive and "ATR" not in r]
    lines = [f"{speaker}: {LABEL}"]
    rebut = last_argument(role, facts.text)
    if rebut:
        lines.append(f"Answering the {rebut[0]}, who argued \"{rebut[1]}\":")
    if role == "bull":
        lines.append(f"The case for owning {facts.ticker} rests on the verified figures.")
        lines += positive or ["No bullish figure is verified, yet none is verifiably broken."]
        if negative:
            lines.append("The weaker readings are real but tradable: " + " ".join(negative))
    elif role == "bear":
        lines.append(f"The case against {facts.ticker} rests on what the data does not support.")
        lines += negative or ["No bearish figure is verified, but the upside is already in "
                              "the price."]
        if positive:
            lines.append("The bullish readings do not remove the risk: " + " ".join(positive))
        if _data_gaps(facts):
            lines.append(f"{_data_gaps(facts)} data source(s) returned NO_DATA_AVAILABLE, so "
                         "part of the picture is unverified.")
    else:
        lines.append(f"The trader proposes: {proposal or 'no proposal found in the prompt'}.")
        stance = {"aggressive": "Take the position at full size; the verified trend is the "
                                "edge and waiting costs more than volatility.",
                  "conservative": "Cut size and keep the stop tight; protect capital first, "
                                  "the figures do not justify full exposure.",
                  "neutral": "Take a measured position: half size, stop at the ATR-based "
                             "level, add only if the figures confirm."}[role]
        lines += readings[:3] + [stance]
    lines.append(f"By the {len(why)}-term offline rule the figures score {total:+d}, which "
                 f"reads {rating.value}.")
    quoted = figure_lines(facts)
    if quoted:
        lines += ["Verified figures used:"] + quoted
    return "\n".join(lines)
