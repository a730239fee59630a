"""What the offline model reads out of a prompt: ticker, trade date, snapshot figures, tool
results, and the documented rating rule.

Figures are kept as the exact strings found in the messages (``Figure.raw``) so the offline
replies quote numbers verbatim and never print a number that was not given to them.

The rating rule (on the verified snapshot figures found in the messages)::

    score = (+1 if close > close_50_sma else -1)
          + (+1 if close_50_sma > close_200_sma else -1)
          + (+1 if macdh > 0 else -1)
          + (-1 if rsi > 70 else +1 if rsi < 30 else 0)
    score >= 3 -> Buy; 1..2 -> Overweight; 0 -> Hold; -1..-2 -> Underweight; <= -3 -> Sell

A term whose figures are missing counts 0; no figures at all -> Hold.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from events.rating import Rating
from events.records import Message

RULE_TEXT = ("offline rule: score = (+1 if close > close_50_sma else -1) + (+1 if close_50_sma "
             "> close_200_sma else -1) + (+1 if macdh > 0 else -1) + (-1 if rsi > 70, +1 if "
             "rsi < 30, else 0); >=3 Buy, 1..2 Overweight, 0 Hold, -1..-2 Underweight, "
             "<=-3 Sell; no snapshot -> Hold")

SNAPSHOT_MARK = "VERIFIED MARKET SNAPSHOT"
NO_DATA_MARK = "NO_DATA_AVAILABLE"
_NUM = r"-?\d[\d,]*(?:\.\d+)?"
_TICKER = re.compile(r"(?im)^\W*ticker\W*:\s*\**\s*([A-Za-z0-9.\-_^=]+)")
_DATE = re.compile(r"(?im)^\W*trade date\W*:\s*\**\s*(\d{4}-\d{2}-\d{2})")
_KV = re.compile(rf"(?m)^\s*[-*>|]*\s*`?([a-z][a-z0-9_]*)`?\s*:\s*\**({_NUM}|n/a)\**\s*$")
_BAR = re.compile(rf"open ({_NUM}) high ({_NUM}) low ({_NUM}) close ({_NUM}) volume ({_NUM})")
_ERROR = re.compile(r"(?i)^\s*(error\b|\[?error\]?:|failed\b|exception\b)|tool error")


@dataclass(frozen=True)
class Figure:
    raw: str  # exactly as written in the prompt
    value: float | None

    @classmethod
    def parse(cls, raw: str) -> Figure:
        try:
            return cls(raw, float(raw.replace(",", "")))
        except ValueError:
            return cls(raw, None)


@dataclass(frozen=True)
class ToolOutcome:
    name: str
    arguments: dict
    content: str

    @property
    def status(self) -> str:
        if NO_DATA_MARK in self.content:
            return "no_data"
        return "error" if _ERROR.search(self.content[:200]) else "ok"


@dataclass
class Facts:
    ticker: str = "UNKNOWN"
    trade_date: dt.date | None = None
    figures: dict[str, Figure] = field(default_factory=dict)
    snapshot_lines: list[str] = field(default_factory=list)
    tools: list[ToolOutcome] = field(default_factory=list)
    text: str = ""

    def value(self, key: str) -> float | None:
        fig = self.figures.get(key)
        return fig.value if fig else None

    def raw(self, key: str) -> str | None:
        fig = self.figures.get(key)
        return fig.raw if fig and fig.value is not None else None


def read_facts(messages: list[Message]) -> Facts:
    facts = Facts(text="\n\n".join(m.content for m in messages if m.content))
    first_user = next((m.content for m in messages if m.role == "user"), "")
    for source in (first_user, facts.text):
        if facts.ticker == "UNKNOWN" and (match := _TICKER.search(source)):
            facts.ticker = match.group(1).upper()
        if facts.trade_date is None and (match := _DATE.search(source)):
            facts.trade_date = dt.date.fromisoformat(match.group(1))
    _read_figures(facts)
    calls = {c.id: c for m in messages for c in m.tool_calls}
    for m in messages:
        if m.role == "tool":
            call = calls.get(m.tool_call_id or "")
            facts.tools.append(ToolOutcome(m.name or (call.name if call else "tool"),
                                           dict(call.arguments) if call else {}, m.content))
    return facts


def _read_figures(facts: Facts) -> None:
    """Figures from the latest snapshot block; else from verbatim "key: number" lines quoted
    anywhere (offline replies quote them so later roles without the snapshot still see them)."""
    text = facts.text
    start = text.rfind(SNAPSHOT_MARK)
    if start >= 0:
        block = text[start:].split("\n\n", 1)[0]
        facts.snapshot_lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        _scan(block, facts.figures)
    else:
        _scan(text, facts.figures)


def _scan(text: str, figures: dict[str, Figure]) -> None:
    for match in _KV.finditer(text):
        figures.setdefault(match.group(1), Figure.parse(match.group(2)))
    bars = list(_BAR.finditer(text))
    bar = bars[-1] if bars else None  # the latest bar quoted
    if bar:
        for i, key in enumerate(("open", "high", "low", "close", "volume"), start=1):
            figures.setdefault(key, Figure.parse(bar.group(i)))


def score(facts: Facts) -> tuple[int, list[str]]:
    """The rule's score and one line per term saying which figures decided it."""
    close, sma50, sma200 = facts.value("close"), facts.value("close_50_sma"), facts.value(
        "close_200_sma")
    macdh, rsi = facts.value("macdh"), facts.value("rsi")
    total, why = 0, []
    if close is not None and sma50 is not None:
        term = 1 if close > sma50 else -1
        total += term
        why.append(f"close {facts.raw('close')} {'>' if term > 0 else '<='} close_50_sma "
                   f"{facts.raw('close_50_sma')}: {term:+d}")
    if sma50 is not None and sma200 is not None:
        term = 1 if sma50 > sma200 else -1
        total += term
        why.append(f"close_50_sma {facts.raw('close_50_sma')} {'>' if term > 0 else '<='} "
                   f"close_200_sma {facts.raw('close_200_sma')}: {term:+d}")
    if macdh is not None:
        term = 1 if macdh > 0 else -1
        total += term
        why.append(f"macdh {facts.raw('macdh')} {'>' if term > 0 else '<='} 0: {term:+d}")
    if rsi is not None:
        term = -1 if rsi > 70 else 1 if rsi < 30 else 0
        total += term
        zone = "overbought (>70)" if term < 0 else "oversold (<30)" if term > 0 else "neutral"
        why.append(f"rsi {facts.raw('rsi')} {zone}: {term:+d}")
    return total, why


def has_figures(facts: Facts) -> bool:
    return any(facts.value(k) is not None
               for k in ("close", "close_50_sma", "close_200_sma", "macdh", "rsi"))


def rating_for(facts: Facts) -> tuple[Rating, int, list[str]]:
    if not has_figures(facts):
        return Rating.HOLD, 0, ["no verified snapshot figures in the prompt: Hold by rule"]
    total, why = score(facts)
    if total >= 3:
        rating = Rating.BUY
    elif total >= 1:
        rating = Rating.OVERWEIGHT
    elif total == 0:
        rating = Rating.HOLD
    elif total >= -2:
        rating = Rating.UNDERWEIGHT
    else:
        rating = Rating.SELL
    return rating, total, why


def figure_lines(facts: Facts, keys: tuple[str, ...] = (
        "close", "close_50_sma", "close_200_sma", "rsi", "macdh", "atr")) -> list[str]:
    """Verbatim "key: value" lines for the figures present (re-readable by ``_scan``)."""
    return [f"{k}: {facts.raw(k)}" for k in keys if facts.raw(k) is not None]
