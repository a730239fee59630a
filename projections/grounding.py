"""The grounding audit: every number and date a role wrote, checked against what it was shown.

Guards filter the data a model reads; nothing filtered what a model *writes*. This pure
function (no I/O, no clock) takes one output and the run's state just before it, rebuilds
the sources that role was shown (``VISIBLE``: the verified snapshot, its own tool results,
earlier reports and debate turns, the plan, the proposal, past context), and classifies each
figure of the output:

* **grounded** - the value appears in a source, at the precision written (rounded or cut to
  the digits shown; ``$1.2B`` matches 1,204,000,000; ``12.5%`` matches 0.125); the source
  is named by a short name of its event (``snapshot``, ``tool:0:1``, ``report:market``,
  ``bull:r1``, ``plan`` ...: ``SOURCE_EVENTS``), the closest value winning;
* **derived** - the value is the difference or the percentage change of two *operands*
  (the snapshot's headline figures, i.e. last bar and indicators, and the figures this output
  quotes as grounded), or a share (a as % of b) or an offset a ± k·b (k = 1.5, 2, 3: stops
  at ATR multiples) where one operand is quoted by the output; a figure written with ``%``
  is only ever a percentage change or a share;
* **look-ahead** - a date after the trade date, or a period (month, quarter, half, year)
  that starts after it, that no source mentions; and any untraced figure in the same
  sentence as one ("Q3 2024 revenue of $30B" in a June 2024 run);
* **ungrounded** - everything else.

What is *not* a claim, and skipped (each rule is tested):

1. list numbering and heading numbers at the start of a line (``1.``, ``2)``);
2. the trade date itself, and a month, quarter, half or year that starts on or before the
   trade date (context such as "since 2020" or "in Q1 2024"), whether or not a source has it;
3. numbers that are part of a name or a parameter: glued to letters or ``_`` (``Q3``,
   ``close_50_sma``, ``10-K``, ``50-day``), window lengths (``14 days``, ``52 weeks``,
   ``5 trading sessions``), indicator parameters (``RSI(14)``, ``MACD(12, 26, 9)``), and
   index names (``S&P 500``, ``Nasdaq 100``, ``Russell 2000`` ...);
4. bare integers from -10 to 10 with no unit, decimals or currency (counts of points,
   rounds, scores on a 0-10 scale, a rule's +1/-1 terms);
5. elision markers of quoted text (``... (12 lines omitted) ...``), times of day (``16:00``),
   the ticker itself, thresholds of a rule (a bare number after ``<``, ``>``, ``<=``, ``>=``),
   the conventional RSI levels 20/30/70/80 in a sentence about RSI or overbought/oversold,
   and counts of what the role was shown (``20 data source(s)``, ``12 tools``, ``15 rows``).
"""
from __future__ import annotations

import bisect
import calendar
import datetime as dt
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import lru_cache, reduce
from typing import Any, Literal

from events import domain as d
from events.roles import ROLES, speaker_of
from projections.run_state import RunState, apply

Verdict = Literal["grounded", "derived", "ungrounded", "look_ahead"]
Read = tuple[Literal["date", "period"], dt.date, str]  # a written date: kind, first day, key
FLAGGED: tuple[Verdict, ...] = ("ungrounded", "look_ahead")


@dataclass(frozen=True, slots=True)
class Claim:
    raw: str
    start: int
    end: int
    kind: Literal["number", "date", "period"]
    value: float = 0.0  # numbers: absolute value, suffix applied
    unit: float = 0.0  # numbers: one unit of the last digit written, suffix applied
    percent: bool = False
    day: dt.date | None = None  # dates; periods: first day
    key: str = ""  # dates: ISO; periods: normalised name (for matching sources)


@dataclass(frozen=True, slots=True)
class Finding:
    claim: Claim
    verdict: Verdict
    source: str | None = None  # the event (or operation) it came from


# ---- extraction -------------------------------------------------------------------------------
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
#: Month names as a trie, behind a first-letter check: an alternation of 25 names tried at
#: every position was most of the audit's cost. Longest name first, as greedy suffixes.
_MON = (r"(?=[adfjmnos])(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?"
        r"|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_DATE_FORMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ymd", re.compile(r"(?<![\w.])(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?![\w/]|\.\d)")),
    ("mdy_num", re.compile(r"(?<![\w./])(\d{1,2})/(\d{1,2})/(\d{4})(?![\w/])")),
    ("mdy", re.compile(rf"(?i)\b({_MON})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")),
    ("dmy", re.compile(rf"(?i)\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MON}),?\s+(\d{{4}})\b")),
    ("quarter", re.compile(r"(?i)\b(?:Q([1-4])\s*(?:FY\s?)?'?(\d{4}|\d{2})|([1-4])Q\s?'?(\d{4}|\d{2}))\b")),
    ("half", re.compile(r"(?i)\b(?:H([12])\s*'?(\d{4})|([12])H\s?(\d{4}))\b")),
    ("fiscal", re.compile(r"(?i)\b(?:FY\s?'?|fiscal\s+(?:year\s+)?)(\d{4}|\d{2})\b")),
    ("month_year", re.compile(rf"(?i)\b({_MON})\s+(\d{{4}})\b")),
    ("month_day", re.compile(rf"(?i)\b({_MON})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?![,.]?\s*\d)")),
    ("year", re.compile(r"(?<![\w.,$€£¥%/-])((?:19|20)\d{2})(?![\w%]|[.,]\d|\s?(?:[kKmMbB]n?|bn|million|billion)\b)")),
)
#: Cheap tests on the lower-cased text, each a condition some forms need (``_NEEDS``): most
#: sources (tables of prices and indicators) have no month name, quarter, half, fiscal year
#: or m/d/y date, so those forms' scans of the whole text are skipped without changing what
#: is found. Forms not in ``_NEEDS`` always run.
_MONTH_AND_NUMBER = re.compile(rf"(?i)\b{_MON},?\s+\d")  # what every month-name form has
_PROBES: dict[str, Callable[[str], bool]] = {
    "month": lambda low: _MONTH_AND_NUMBER.search(low) is not None,
    "slash": lambda low: "/" in low,
    "quarter": lambda low: any(q in low for q in ("q1", "q2", "q3", "q4", "1q", "2q", "3q", "4q")),
    "half": lambda low: any(h in low for h in ("h1", "h2", "1h", "2h")),
    "fiscal": lambda low: "fy" in low or "fiscal" in low,
}
_NEEDS = {"mdy": "month", "dmy": "month", "month_year": "month", "month_day": "month",
          "mdy_num": "slash", "quarter": "quarter", "half": "half", "fiscal": "fiscal"}
_SUFFIX = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "mm": 1e6, "million": 1e6,
           "b": 1e9, "bn": 1e9, "billion": 1e9, "t": 1e12, "tn": 1e12, "trillion": 1e12}
_NUMBER = re.compile(  # the lookahead first: a cheap test of one character at each position
    r"(?=[-+\u2212$€£¥\d])(?<![\w./:])(?P<sign>[-+\u2212])?(?P<cur>[$€£¥])?(?P<sign2>[-+])?"
    r"(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"(?:\s?(?P<suffix>thousand|million|billion|trillion|bn|mn|mm|tn|[kKmMbBT])(?![a-zA-Z]))?"
    r"(?P<pct>\s?%|\s?percent\b|\s?pct\b)?(?P<x>x(?![a-zA-Z]))?"
    r"(?![\w:]|\.\d)")
_WINDOW = re.compile(r"(?i)^\s?(?:-|\s)?(?:trading\s+|calendar\s+|business\s+)?"
                     r"(?:days?|weeks?|months?|years?|sessions?|periods?|bars?|quarters?|"
                     r"lines? omitted|minutes?|hours?)\b")
_GLUED = re.compile(r"^-[a-zA-Z]")  # 50-day, 10-K
_PARAMS = re.compile(r"[A-Za-z]\((?:[\d.]+,\s*)*$")  # RSI(14 / MACD(12, 26
_INDEX_NAMES = re.compile(r"(?i)(?:S&P|Nasdaq|Russell|Dow|FTSE|Nikkei|DAX|Stoxx|CAC|Euro Stoxx"
                          r"|Hang Seng|ASX|TSX|MSCI)[\s-]*$")
_LIST_ITEM = re.compile(r"^[\s>#*|-]*$")
_COMPARED = re.compile(r"(?:[<>]=?|[≤≥])\s*\(?$")  # "rsi > 70", "(<30)": a rule's threshold
_MATERIAL = re.compile(r"(?i)^\s(?:data\s)?(?:sources?|tools?|tool calls?|reports?|rows?|"
                       r"lines?)\b(?:\(s\))?")  # counts of what the role was shown
_RSI_LEVELS = (20.0, 30.0, 70.0, 80.0)
_RSI_WORDS = re.compile(r"(?i)overbought|oversold|\bRSI\b")


def _year(text: str) -> int:
    y = int(text)
    return y + 2000 if y < 100 else y


def _safe_date(y: int, m: int, day: int) -> dt.date | None:
    try:
        return dt.date(y, m, day)
    except ValueError:
        return None


def _month(name: str) -> int:
    return _MONTHS[name.lower().rstrip(".")]


def _day(day: dt.date | None, key: str | None = None) -> Read | None:
    return None if day is None else ("date", day, key or day.isoformat())


def _undated(g: tuple, trade: dt.date) -> Read | None:
    """A day without a year ("May 6"): the latest such day on or before the trade date."""
    day = _safe_date(trade.year, _month(g[0]), int(g[1]))
    if day is not None and day > trade:
        day = _safe_date(trade.year - 1, day.month, day.day)
    return _day(day, day.strftime("--%m-%d") if day else None)


def _quarter(g: tuple, raw: str) -> Read:
    q, y = (int(g[0]), _year(g[1])) if g[0] else (int(g[2]), _year(g[3]))
    first = dt.date(y, 3 * q - 2, 1)
    if "fy" in raw.lower():  # a fiscal quarter: its year may start 11 months early
        months = 3 * q - 2  # counted from February of the year before
        first = dt.date(y - 1 + months // 12, months % 12 + 1, 1)
    return "period", first, f"q{q} {y}"


def _half(g: tuple) -> Read:
    h, y = (int(g[0]), _year(g[1])) if g[0] else (int(g[2]), _year(g[3]))
    return "period", dt.date(y, 6 * h - 5, 1), f"h{h} {y}"


#: How each written form reads: (groups, trade date, raw) -> (kind, first day, key) or None.
_READ: dict[str, Callable[[tuple, dt.date, str], Read | None]] = {
    "ymd": lambda g, t, r: _day(_safe_date(int(g[0]), int(g[1]), int(g[2]))),
    "mdy_num": lambda g, t, r: _day(_safe_date(int(g[2]), int(g[0]), int(g[1]))),
    "mdy": lambda g, t, r: _day(_safe_date(int(g[2]), _month(g[0]), int(g[1]))),
    "dmy": lambda g, t, r: _day(_safe_date(int(g[2]), _month(g[1]), int(g[0]))),
    "month_day": lambda g, t, r: _undated(g, t),
    "quarter": lambda g, t, r: _quarter(g, r),
    "half": lambda g, t, r: _half(g),
    # a fiscal year may start up to 11 months before its calendar year
    "fiscal": lambda g, t, r: ("period", dt.date(_year(g[0]) - 1, 2, 1), f"fy {_year(g[0])}"),
    "month_year": lambda g, t, r: ("period", dt.date(int(g[1]), _month(g[0]), 1),
                                   f"{int(g[1])}-{_month(g[0]):02d}"),
    "year": lambda g, t, r: ("period", dt.date(int(g[0]), 1, 1), g[0]),
}


def _date_claim(form: str, m: re.Match[str], trade: dt.date) -> Claim | None:
    read = _READ[form](m.groups(), trade, m.group(0))
    if read is None:
        return None
    kind, day, key = read
    return Claim(m.group(0), m.start(), m.end(), kind, day=day, key=key)


#: Texts remembered by the caches below: a worker audits many runs at once, and each run
#: shows the same tool results and reports to many roles (64 runs x ~40 texts of ~1 KB).
CACHED_TEXTS = 8192


@lru_cache(maxsize=CACHED_TEXTS)
def _dates(text: str, trade: dt.date) -> tuple[Claim, ...]:
    """Cached: the same tool results and reports are sources of many outputs of a run."""
    found: list[Claim] = []
    taken = bytearray(len(text))  # 1 where an earlier form already read a date
    low = text.lower()
    present = {name: bool(probe(low)) for name, probe in _PROBES.items()}
    for form, pattern in _DATE_FORMS:
        if form in _NEEDS and not present[_NEEDS[form]]:
            continue
        for m in pattern.finditer(text):
            start, end = m.start(), m.end()
            if any(taken[start:end]):
                continue
            claim = _date_claim(form, m, trade)
            if claim is not None:
                found.append(claim)
                taken[start:end] = b"\x01" * (end - start)
    return tuple(sorted(found, key=lambda c: c.start))


def _value(m: re.Match[str]) -> tuple[float, float]:
    """A written number's value and one unit of its last digit, its suffix applied."""
    int_, frac, suffix = m.group("int", "frac", "suffix")
    scale = _SUFFIX[suffix.lower()] if suffix else 1.0
    value = float(int_.replace(",", "") + (frac or "")) * scale
    return value, 10.0 ** -(len(frac) - 1 if frac else 0) * scale


def _number(m: re.Match[str]) -> Claim:
    value, unit = _value(m)
    return Claim(m.group(0).strip(), m.start(), m.end(), "number", value=value, unit=unit,
                 percent=bool(m.group("pct")))


def _skipped(m: re.Match[str], text: str, claim: Claim) -> bool:
    """Rules 1, 3, 4, 5 of the module docstring."""
    at = m.start()
    before, after = text[max(0, at - 30):at], text[m.end():m.end() + 40]  # all the rules read
    line_start = text[text.rfind("\n", 0, at) + 1:at]
    bare = not (m.group("cur") or m.group("frac") or m.group("suffix") or m.group("pct")
                or m.group("x") or "," in m.group("int"))
    if _LIST_ITEM.match(line_start) and bare and re.match(r"^[.)]\s", after):
        return True
    if bare and claim.value <= 10:
        return True
    if _GLUED.match(after) or _WINDOW.match(after) and not m.group("pct"):
        return True
    if bare and (_COMPARED.search(before[-4:]) or _MATERIAL.match(after)):
        return True
    if bare and claim.value in _RSI_LEVELS and _RSI_WORDS.search(_sentence_at(text, m.start())):
        return True
    if bare and _PARAMS.search(before[-30:]) and re.match(r"^\s*[,)]", after):
        return True
    return bool(_INDEX_NAMES.search(before[-20:]) and bare)


def extract(text: str, trade_date: dt.date, ticker: str = "") -> list[Claim]:
    """Every figure in ``text`` that is a claim (see the module docstring), in text order."""
    if ticker:
        text = re.sub(rf"(?<![\w]){re.escape(ticker)}(?![\w])", lambda t: " " * len(t.group(0)),
                      text)
    dates = _dates(text, trade_date)
    in_date = bytearray(len(text))
    for c in dates:
        in_date[c.start:c.end] = b"\x01" * (c.end - c.start)
    claims = [c for c in dates if not (c.kind == "date" and c.day == trade_date)
              and not (c.kind == "period" and c.day is not None and c.day <= trade_date)]
    for m in _NUMBER.finditer(text):
        if any(in_date[m.start():m.end()]):
            continue
        claim = _number(m)
        if not _skipped(m, text, claim):
            claims.append(claim)
    return sorted(claims, key=lambda c: c.start)


# ---- sources ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Source:
    label: str  # the event it is in, by its short name (SOURCE_EVENTS)
    text: str


#: Short source names (kept in GroundingChecked.sources) -> the event each names.
SOURCE_EVENTS = {
    "identity": "InstrumentResolved", "snapshot": "MarketSnapshotTaken",
    "tool:<call>:<n>": "ToolCallCompleted of the turn (call id = turn id + this)",
    "report:<analyst>": "AnalystReportSubmitted", "bull:r<round>": "DebateArgumentMade",
    "aggressive:r<round>": "RiskArgumentMade", "plan": "InvestmentPlanIssued",
    "proposal": "TradeProposed", "past": "PastContextLoaded"}


def _context(s: RunState, _turn: str) -> list[Source]:
    out = []
    if s.instrument is not None:
        inst = s.instrument
        out.append(Source("identity", " ".join(
            str(v) for v in (inst.name, inst.sector, inst.industry, inst.exchange) if v)))
    if s.snapshot is not None:
        out.append(Source("snapshot", s.snapshot.render()))
    return out


def _tools(s: RunState, turn: str) -> list[Source]:
    return [Source(f"tool{e.call_id.removeprefix(turn)}",
                   f"{e.tool}({', '.join(f'{k}={v}' for k, v in e.arguments.items())})\n"
                   f"{e.result.text}")
            for e in s.calls.get(turn, ()) if isinstance(e, d.ToolCallCompleted)]


def _reports(s: RunState, _turn: str) -> list[Source]:
    return [Source(f"report:{a}", t) for a, t in s.reports.items()]


def _speeches(attr: str) -> Callable[[RunState, str], list[Source]]:
    def sources(s: RunState, turn: str) -> list[Source]:
        return [Source(f"{sp.speaker}:r{sp.round}", sp.text)
                for sp in getattr(s, attr) if sp.turn_id != turn]
    return sources


def _plan(s: RunState, _turn: str) -> list[Source]:
    return [Source("plan", s.plan.render())] if s.plan else []


def _proposal(s: RunState, _turn: str) -> list[Source]:
    return [Source("proposal", s.proposal.render())] if s.proposal else []


def _past(s: RunState, _turn: str) -> list[Source]:
    return [Source("past", s.past_context)] if s.past_context else []


_debate, _risk = _speeches("debate"), _speeches("risk")
#: What each stage is shown (mirrors actors.prompts.user_message): stage -> source builders.
VISIBLE: dict[str, tuple[Callable[[RunState, str], list[Source]], ...]] = {
    "analyst": (_context, _tools),
    "debate": (_context, _reports, _debate),
    "research": (_context, _debate),
    "trading": (_context, _plan),
    "risk": (_context, _proposal, _reports, _risk),
    "portfolio": (_context, _plan, _proposal, _risk, _past),
}


def sources_for(s: RunState, role: str, turn_id: str) -> list[Source]:
    return [src for build in VISIBLE.get(ROLES[role].stage, ()) for src in build(s, turn_id)]


_NOT_HEADLINE = re.compile(r"(?m)^recent closes.*$")  # the snapshot's list of past closes


def _numbers(text: str, trade: dt.date) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Every number of a source, and those outside its list of recent closes (the headline,
    for the snapshot); its dates left out (a date's parts are not figures)."""
    pieces, at = [], 0
    for c in _dates(text, trade):
        pieces += [text[at:c.start], " " * (c.end - c.start)]
        at = c.end
    blanked = "".join(pieces) + text[at:]
    closes = [(m.start(), m.end()) for m in _NOT_HEADLINE.finditer(blanked)]
    values, headline = [], []
    for m in _NUMBER.finditer(blanked):
        value = _value(m)[0]
        values.append(value)
        if not any(a <= m.start() < b for a, b in closes):
            headline.append(value)
    return tuple(values), tuple(headline)


def _keys(c: Claim) -> tuple[str, ...]:
    """The names a source date answers to: itself, and the day, month, quarter, half and
    year it falls in (so "June 2024" is grounded by a source dated 2024-06-14)."""
    if c.kind != "date" or c.day is None:
        return (c.key,)
    day = c.day
    return (c.key, f"--{day.month:02d}-{day.day:02d}", f"{day.year}-{day.month:02d}",
            f"q{(day.month - 1) // 3 + 1} {day.year}", f"h{(day.month - 1) // 6 + 1} {day.year}",
            str(day.year))


@dataclass(frozen=True, slots=True)
class _Facts:
    """What one source text offers: the names its dates answer to, its numbers (sorted),
    and its headline numbers (for the snapshot: every line but the list of recent closes)."""
    keys: tuple[str, ...]
    values: tuple[float, ...]
    headline: tuple[float, ...]


@lru_cache(maxsize=CACHED_TEXTS)
def _facts(text: str, trade: dt.date) -> _Facts:
    """Cached: each output re-reads every source its role was shown."""
    keys = tuple(dict.fromkeys(key for c in _dates(text, trade) for key in _keys(c)))
    values, headline = _numbers(text, trade)
    return _Facts(keys, tuple(sorted(values)), headline)


class _Index:
    """Source numbers, sorted, for interval look-ups; source dates and periods, as sets."""

    def __init__(self, sources: list[Source], trade: dt.date):
        pairs: list[tuple[float, str]] = []
        self.dates: dict[str, str] = {}
        headline: set[float] = set()
        for src in sources:
            facts = _facts(src.text, trade)
            for key in facts.keys:
                self.dates.setdefault(key, src.label)
            pairs += zip(facts.values, itertools.repeat(src.label))
            if src.label == "snapshot":
                headline.update(facts.headline)
        pairs.sort(key=lambda p: p[0])  # stable: the earlier source wins a tie
        self.values = [p[0] for p in pairs]
        self.labels = [p[1] for p in pairs]
        #: operands of derived figures besides the output's own: the snapshot's headline
        #: (last bar and indicators; not its list of recent closes)
        self.headline = sorted(headline)

    def find(self, value: float, unit: float) -> str | None:
        """The source of the closest value ``value`` may stand for, or None."""
        lo, hi = _interval(value, unit)
        i = bisect.bisect_left(self.values, lo)
        j = bisect.bisect_left(self.values, hi, lo=i)
        if i == j:
            return None
        best = min(range(i, j), key=lambda k: (abs(self.values[k] - value), k))
        return self.labels[best]


def _interval(value: float, unit: float) -> tuple[float, float]:
    """The source values ``value`` stands for when written with ``unit`` precision: rounded
    (half a unit either way) or cut (up to a unit above)."""
    eps = 1e-9 * max(1.0, value)
    return value - unit / 2 - eps, value + unit + eps


def _grounded(c: Claim, index: _Index) -> str | None:
    found = index.find(c.value, c.unit)
    if found is None and c.percent:
        found = index.find(c.value / 100, c.unit / 100)
    return found


_MULTIPLES = (1.5, 2.0, 3.0)
MAX_OPERANDS = 60  # operands of derived figures: the headline, then the first quoted figures


@dataclass(frozen=True, slots=True)
class _Derivation:
    value: float
    percent: bool  # a percentage change or a share (what a figure written with % can be)
    how: str


def _derivations(headline: list[float], quoted: list[float]) -> list[_Derivation]:
    """Every value two operands give, sorted. Differences and percentage changes may use any
    two operands; a share (a as % of b) and an offset a ± k·b need one operand the output
    itself quotes (the writer shows what it computed from)."""
    own = set(quoted)
    pool = sorted(set(list(dict.fromkeys([*headline, *quoted]))[:MAX_OPERANDS]))
    out: list[_Derivation] = []
    for i, a in enumerate(pool):
        for b in pool[i + 1:]:
            out.append(_Derivation(b - a, False, f"difference of {a:g} and {b:g}"))
            for base in (a, b):
                if base:
                    out.append(_Derivation(abs(b - a) / abs(base) * 100, True,
                                           f"% change of {a:g} and {b:g}"))
            if a in own or b in own:
                out += [_Derivation(x / y * 100, True, f"share of {x:g} in {y:g}")
                        for x, y in ((a, b), (b, a)) if y]
                out += [_Derivation(abs(x + sign * k * y), False,
                                    f"{x:g} {'+-'[sign < 0]} {k:g}x{y:g}")
                        for x, y in ((a, b), (b, a)) for k in _MULTIPLES for sign in (1, -1)]
    return sorted(out, key=lambda v: v.value)


def _derived(c: Claim, derivations: list[_Derivation], values: list[float]) -> str | None:
    """How ``c`` follows from two operands, or None."""
    lo, hi = _interval(c.value, c.unit)
    for k in range(bisect.bisect_left(values, lo), bisect.bisect_left(values, hi)):
        if derivations[k].percent == c.percent:
            return derivations[k].how
    return None


_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=\d))+(?:[.!?]+|\n|$)")


def _sentence_at(text: str, at: int) -> str:
    for m in _SENTENCE.finditer(text):
        if m.start() <= at < m.end():
            return m.group(0)
    return ""


def _sentences(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _SENTENCE.finditer(text) if m.end() > m.start()]


#: Languages whose numbers are written with a decimal comma and dotted thousands: an output
#: in one of them (``--language``) is read with the two separators swapped inside each number
#: that is unambiguous in that convention.
DECIMAL_COMMA = frozenset({
    "german", "french", "spanish", "italian", "portuguese", "brazilian portuguese", "dutch",
    "russian", "ukrainian", "polish", "czech", "slovak", "romanian", "hungarian", "turkish",
    "greek", "swedish", "norwegian", "danish", "finnish", "indonesian", "vietnamese",
    "croatian", "serbian", "slovenian", "bulgarian", "catalan"})
#: 1.234,56 / 1.234.567 / 12,5 (never 1,234 or 0.125: an English number in a report written
#: in one of those languages stays as written)
_COMMA_NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:\.\d{3})+,\d+|\d{1,3}(?:\.\d{3}){2,}"
                           r"|\d+,\d{1,2})(?![\w]|[.,]\d)")
_SWAP = str.maketrans(".,", ",.")


def _point_decimals(text: str) -> str:
    """``text`` with decimal-comma numbers written the English way; the same length, so every
    position (and each claim's raw text, taken from the original) is unchanged."""
    return _COMMA_NUMBER.sub(lambda m: m.group(0).translate(_SWAP), text)


def classify(text: str, sources: list[Source], trade_date: dt.date, ticker: str = "", *,
             decimal_comma: bool = False) -> list[Finding]:
    """Each claim of ``text`` with its verdict and source (see the module docstring);
    ``decimal_comma``: the text's numbers may be written 1.234,5 (see DECIMAL_COMMA)."""
    index = _Index(sources, trade_date)
    if decimal_comma:
        read = _point_decimals(text)
        claims = [replace(c, raw=text[c.start:c.end].strip())
                  for c in extract(read, trade_date, ticker)]
        text = read
    else:
        claims = extract(text, trade_date, ticker)
    verdicts: dict[int, Finding] = {}
    for i, c in enumerate(claims):
        if c.kind == "number":
            label = _grounded(c, index)
            if label is not None:
                verdicts[i] = Finding(c, "grounded", label)
            continue
        label = index.dates.get(c.key)
        if label is not None:
            verdicts[i] = Finding(c, "grounded", label)
        elif c.day is not None and c.day > trade_date:
            verdicts[i] = Finding(c, "look_ahead")
        else:
            verdicts[i] = Finding(c, "ungrounded")
    ahead_at = [f.claim.start for f in verdicts.values() if f.verdict == "look_ahead"]
    ahead = [(a, b) for a, b in _sentences(text) if any(a <= at < b for at in ahead_at)
             ] if ahead_at else []
    quoted = [f.claim.value for f in verdicts.values()
              if f.verdict == "grounded" and f.claim.kind == "number"]
    pending = [i for i in range(len(claims)) if i not in verdicts]
    derivations = _derivations(index.headline, quoted) if pending else []
    values = [v.value for v in derivations]
    for i in pending:
        c = claims[i]
        how = _derived(c, derivations, values)
        if how is not None:
            verdicts[i] = Finding(c, "derived", how)
        elif any(a <= c.start < b for a, b in ahead):
            verdicts[i] = Finding(c, "look_ahead")
        else:
            verdicts[i] = Finding(c, "ungrounded")
    return [verdicts[i] for i in range(len(claims))]


# ---- the event --------------------------------------------------------------------------------
#: Output event type -> the text its role wrote.
OUTPUT_TEXT: dict[str, Callable[[Any], str]] = {
    "AnalystReportSubmitted": lambda e: e.report,
    "DebateArgumentMade": lambda e: e.argument,
    "RiskArgumentMade": lambda e: e.argument,
    "InvestmentPlanIssued": lambda e: e.plan.render(),
    "TradeProposed": lambda e: e.proposal.render(),
    "PortfolioDecisionIssued": lambda e: e.decision.render(),
}


def findings_of(state: RunState, output: d.DomainEvent) -> list[Finding] | None:
    """Every figure of ``output`` with its verdict and source, given ``state``, the run just
    before it. None for an event that is not a role's written output."""
    text_of = OUTPUT_TEXT.get(output.type)
    if text_of is None or state.config is None:
        return None
    turn_id: str = getattr(output, "turn_id", "")
    return classify(text_of(output), sources_for(state, speaker_of(output), turn_id),
                    state.config.trade_date, state.config.ticker,
                    decimal_comma=state.config.output_language.strip().lower() in DECIMAL_COMMA)


def check_output(state: RunState, output: d.DomainEvent) -> d.GroundingChecked | None:
    """The audit of ``output`` given ``state``, the run just before it (its model calls
    included). None for an event that is not a role's written output."""
    findings = findings_of(state, output)
    if findings is None:
        return None
    turn_id: str = getattr(output, "turn_id", "")
    calls = [e for e in state.calls.get(turn_id, ()) if isinstance(e, d.LLMCallCompleted)]
    sources: dict[str, int] = {}
    for f in findings:
        if f.verdict == "grounded" and f.source:
            sources[f.source] = sources.get(f.source, 0) + 1
    return d.GroundingChecked(
        turn_id=turn_id, role=speaker_of(output), model=calls[-1].model if calls else "?",
        grounded=sum(f.verdict == "grounded" for f in findings),
        derived=sum(f.verdict == "derived" for f in findings), sources=sources,
        flagged=[(f.claim.raw, f.verdict) for f in findings if f.verdict in FLAGGED])


def run_findings(events: Iterable[Any]) -> dict[str, list[Finding]]:
    """turn id -> every figure of that output with its verdict and source, recomputed from a
    run's events in one fold (the stored GroundingChecked keeps counts; `replay --json`
    shows each figure)."""
    s, out = RunState(), {}
    for item in events:
        payload = getattr(item, "payload", item)
        findings = findings_of(s, payload)
        if findings is not None:
            out[getattr(payload, "turn_id", "")] = findings
        s = apply(s, payload)
    return out


def check_before(state: RunState, calls: list[d.LLMCallCompleted], output: d.DomainEvent
                 ) -> d.GroundingChecked | None:
    """``check_output`` for a turn whose final model call is appended with its output."""
    return check_output(reduce(apply, calls, state), output)


# ---- what the deciders are told ---------------------------------------------------------------
#: Deciding role -> the output types it receives (whose flagged figures it is told about).
RECEIVED: dict[str, tuple[str, ...]] = {
    "research_manager": ("DebateArgumentMade",),
    "portfolio_manager": ("InvestmentPlanIssued", "TradeProposed", "RiskArgumentMade"),
}
_LABELS = {"ungrounded": "not found in the data", "look_ahead": "after the trade date"}


def flagged_note(s: RunState, role: str) -> str:
    """A prompt section listing the figures ``role`` received that the audit could not trace,
    or '' when there are none."""
    kinds = RECEIVED.get(role, ())
    lines = []
    for turn_id, check in s.grounding.items():
        if s.answered.get(turn_id) in kinds and check.flagged:
            who = ROLES[check.role].title
            rnd = s.assigned[turn_id].round if turn_id in s.assigned else 1
            figures = "; ".join(f"{raw} ({_LABELS[kind]})" for raw, kind in check.flagged)
            lines.append(f"- {who} (round {rnd}): {figures}")
    if not lines:
        return ""
    return ("## Unverified figures\nThe grounding audit could not trace these figures in what "
            "you received to the data; treat them as unsupported:\n" + "\n".join(lines))


# ---- marks in the written reports -------------------------------------------------------------
_MARKS = {"ungrounded": "unverified", "look_ahead": "look-ahead"}


def mark_flagged(text: str, check: d.GroundingChecked | None) -> str:
    """``text`` with each flagged figure followed by a bold mark, under a one-line note; the
    text unchanged when nothing was flagged (or no audit was recorded)."""
    if check is None or not check.flagged:
        return text
    kinds = dict(check.flagged)
    pattern = re.compile("|".join(rf"(?<![\w.]){re.escape(raw)}(?![\w%]|[.,]\d)"
                                  for raw in sorted(kinds, key=len, reverse=True)))
    body = pattern.sub(lambda m: f"{m.group(0)} **[{_MARKS[kinds[m.group(0)]]}]**", text)
    return (f"> **Grounding audit:** {len(check.flagged)} of {check.checked} figures could not "
            f"be traced to the data this role was shown (marked below).\n\n{body}")


def check_of(s: RunState, *, role: str | None = None, turn_id: str | None = None
             ) -> d.GroundingChecked | None:
    """The audit of a turn, or of a role's latest output."""
    if turn_id is not None:
        return s.grounding.get(turn_id)
    return next((c for c in reversed(s.grounding.values()) if c.role == role), None)
