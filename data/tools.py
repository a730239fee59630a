"""The tools analysts may call: one record per tool (name, JSON-schema spec, handler, data
category) in ``TOOLS``, and the dispatcher behind call_tool. ``TOOL_SPECS`` is derived.

Why the dispatcher never raises on bad input: a model's malformed call is a normal event,
and the best repair is a text that says what was wrong and what is valid. All dates are
clamped to the trade date here, before any vendor sees them."""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from events.config import InvalidInput
from events.records import ToolResult, ToolSpec

from .indicators import INDICATORS, UnknownIndicator
from .macro import DEFAULT_MACRO, MACRO_SERIES
from .router import DataError
from .snapshot import StalePrices, history_start
from .symbols import to_yahoo

NO_DATA = "NO_DATA_AVAILABLE"
MAX_ROWS = 400
_S = {"type": "string"}
_DATE = {"type": "string", "description": "YYYY-MM-DD"}
_FREQ = {"type": "string", "enum": ["annual", "quarterly"], "default": "quarterly"}


def _spec(name: str, description: str, props: dict[str, dict], required: list[str]) -> ToolSpec:
    return ToolSpec(name=name, description=description, parameters={
        "type": "object", "properties": props, "required": required})


def _days(default: int, what: str) -> dict:
    return {"type": "integer", "default": default, "description": what}


_STATEMENT = {"get_balance_sheet": "balance", "get_cashflow": "cashflow",
              "get_income_statement": "income"}


class _Args:
    """Argument access that turns every problem into InvalidInput with a usable message."""

    def __init__(self, name: str, raw: dict, trade_date: dt.date):
        self.name, self.raw, self.trade_date = name, raw or {}, trade_date
        self.notes: list[str] = []

    def get(self, key: str, default: Any = None) -> Any:
        value = self.raw.get(key, default)
        if value is None:
            params = ", ".join(TOOL_SPECS[self.name].parameters["properties"])
            raise InvalidInput(f"{self.name} needs argument {key!r} (parameters: {params})")
        return value

    @property
    def category(self) -> str:
        """The data category whose vendor chain serves this tool."""
        return TOOLS[self.name].category

    def symbol(self, key: str) -> tuple[str, str]:
        asked = str(self.get(key))
        return asked, to_yahoo(asked)

    def date(self, key: str) -> dt.date:
        raw = self.get(key, self.trade_date.isoformat() if key == "curr_date" else None)
        try:
            day = dt.date.fromisoformat(str(raw).strip()[:10])
        except ValueError:
            raise InvalidInput(f"{key}={raw!r} is not a date in YYYY-MM-DD form") from None
        if day > self.trade_date:
            self.notes.append(f"{key} {day} clamped to trade date {self.trade_date}")
            return self.trade_date
        return day

    def int(self, key: str, default: int, lo: int, hi: int) -> int:
        try:
            return max(lo, min(hi, int(self.get(key, default))))
        except (TypeError, ValueError):
            raise InvalidInput(f"{key}={self.raw.get(key)!r} is not a whole number") from None


def _who(asked: str, symbol: str) -> str:
    return repr(asked) if asked.upper() == symbol else f"{asked!r} (tried as {symbol!r})"


def no_data(what: str, reasons: list[str]) -> ToolResult:
    why = f" Vendors said: {'; '.join(reasons)}." if reasons else ""
    return ToolResult(status="no_data", text=f"{NO_DATA}: no vendor had {what}; do not "
                      f"estimate or invent these numbers.{why}")


def _num(v: Any) -> str:
    if v is None or v != v:
        return "n/a"
    return f"{v:,.4f}" if isinstance(v, float) and abs(v) < 1000 else (
        f"{v:,.0f}" if isinstance(v, (int, float)) else str(v))


def dispatch(md: Any, name: str, arguments: dict, trade_date: dt.date) -> ToolResult:
    tool = TOOLS.get(name)
    if tool is None:
        return ToolResult(status="error", text=f"unknown tool {name!r}; valid tools: "
                          + ", ".join(TOOL_SPECS))
    args = _Args(name, arguments if isinstance(arguments, dict) else {}, trade_date)
    try:
        result = tool.handler(md, args)
    except (InvalidInput, UnknownIndicator) as exc:
        return ToolResult(status="error", text=f"{name}: {exc}")
    if args.notes and result.status == "ok":
        result = result.model_copy(update={"text": result.text + "\n(" + "; ".join(args.notes)
                                           + ")"})
    return result


def _stock_data(md, a: _Args) -> ToolResult:
    asked, sym = a.symbol("symbol")
    start, end = a.date("start_date"), a.date("end_date")
    ans = md.bars(sym, start, end, category=a.category, tool=a.name)
    if not ans.found:
        return no_data(f"prices for {_who(asked, sym)} between {start} and {end}", ans.reasons)
    bars = ans.value
    head = f"# {sym} daily bars {start}..{end} (vendor {ans.vendor}; {len(bars)} rows"
    if len(bars) > MAX_ROWS:
        bars, head = bars.iloc[-MAX_ROWS:], head + f", last {MAX_ROWS} shown"
    lines = [head + ")", "date,open,high,low,close,volume"]
    lines += [f"{ts.date()},{r.open:.4f},{r.high:.4f},{r.low:.4f},{r.close:.4f},{r.volume:.0f}"
              for ts, r in bars.iterrows()]
    return ToolResult(status="ok", text="\n".join(lines), vendor=ans.vendor)


def _indicators(md, a: _Args) -> ToolResult:
    asked, sym = a.symbol("symbol")
    indicator = str(a.get("indicator")).strip().lower()
    if indicator not in INDICATORS:
        raise UnknownIndicator(f"unknown indicator {indicator!r}; valid indicators: "
                               + ", ".join(INDICATORS))
    curr, back = a.date("curr_date"), a.int("look_back_days", 30, 1, 365)
    start = history_start(curr)
    ans = md.bars(sym, start, curr, category=a.category, tool=a.name)
    if not ans.found:
        return no_data(f"prices to compute {indicator} for {_who(asked, sym)} up to {curr}",
                       ans.reasons)
    values = md.indicator(sym, start, curr, indicator, ans.value, vendor=str(ans.vendor))
    window = values[values.index >= values.index[-1] - dt.timedelta(days=back)]
    lines = [f"# {indicator} for {sym} from {curr - dt.timedelta(days=back)} to {curr} "
             f"(vendor {ans.vendor}): {INDICATORS[indicator].description}"]
    lines += [f"{ts.date()}: {_num(v)}" for ts, v in window.items()]
    return ToolResult(status="ok", text="\n".join(lines), vendor=ans.vendor)


def _snapshot(md, a: _Args) -> ToolResult:
    asked, sym = a.symbol("symbol")
    curr, n = a.date("curr_date"), a.int("look_back_days", 30, 1, 120)
    try:
        got = md.snapshot(sym, curr, n_closes=n, tool=a.name)
    except StalePrices as exc:
        return no_data(f"a verified snapshot for {_who(asked, sym)} on {curr}", [str(exc)])
    if got is None:
        return no_data(f"prices for {_who(asked, sym)} on or before {curr}", [])
    return ToolResult(status="ok", text=got.render(), vendor=got.vendor)


def _render_news(title: str, ans) -> ToolResult:
    lines = [f"# {title} (vendor {ans.vendor})"]
    for n in ans.value:
        lines.append(f"- {n.published:%Y-%m-%d %H:%M} | {n.publisher or '?'} | {n.title}")
        if n.summary:
            lines.append(f"  {n.summary[:400]}")
    return ToolResult(status="ok", text="\n".join(lines), vendor=ans.vendor)


def _news(md, a: _Args) -> ToolResult:
    asked, sym = a.symbol("ticker")
    start, end = a.date("start_date"), a.date("end_date")
    ans = md.news(sym, start, end, tool=a.name)
    if not ans.found:
        return no_data(f"news for {_who(asked, sym)} between {start} and {end}", ans.reasons)
    return _render_news(f"News for {sym} {start}..{end}", ans)


def _global_news(md, a: _Args) -> ToolResult:
    curr = a.date("curr_date")
    start = curr - dt.timedelta(days=a.int("look_back_days", 7, 1, 90))
    ans = md.news(None, start, curr, limit=a.int("limit", 10, 1, 50), tool=a.name)
    if not ans.found:
        return no_data(f"global news between {start} and {curr}", ans.reasons)
    return _render_news(f"Global market news {start}..{curr}", ans)


def _fundamentals(md, a: _Args) -> ToolResult:
    asked, sym = a.symbol("ticker")
    curr = a.date("curr_date")
    ans = md.fundamentals(sym, curr, tool=a.name)
    if not ans.found:
        return no_data(f"key statistics for {_who(asked, sym)} as of {curr}", ans.reasons)
    lines = [f"# Key statistics for {sym} as of {ans.value.as_of or curr} (vendor {ans.vendor})"]
    lines += [f"{k}: {_num(v)}" for k, v in ans.value.values.items()]
    return ToolResult(status="ok", text="\n".join(lines), vendor=ans.vendor)


def _statement(md, a: _Args) -> ToolResult:
    asked, sym = a.symbol("ticker")
    freq = str(a.get("freq", "quarterly")).strip().lower()
    if freq not in ("annual", "quarterly"):
        raise InvalidInput(f"freq={freq!r}; use 'annual' or 'quarterly'")
    kind, curr = _STATEMENT[a.name], a.date("curr_date")
    ans = md.statement(sym, kind, freq, curr, tool=a.name)
    if not ans.found:
        return no_data(f"{freq} {kind} statement for {_who(asked, sym)} by {curr}", ans.reasons)
    periods = ans.value[:8]
    lines = [f"# {freq} {kind} statement for {sym}, periods ended by {curr} "
             f"(vendor {ans.vendor})", "item | " + " | ".join(str(p.period_end) for p in periods)]
    keys = list(dict.fromkeys(k for p in periods for k in p.values))
    lines += [f"{k} | " + " | ".join(_num(p.values.get(k)) for p in periods) for k in keys]
    return ToolResult(status="ok", text="\n".join(lines), vendor=ans.vendor)


def _insider(md, a: _Args) -> ToolResult:
    asked, sym = a.symbol("ticker")
    curr = a.date("curr_date")
    ans = md.insider(sym, curr, tool=a.name)
    if not ans.found:
        return no_data(f"insider transactions for {_who(asked, sym)} by {curr}", ans.reasons)
    lines = [f"# Insider transactions for {sym} on or before {curr} (vendor {ans.vendor})"]
    lines += [f"- {r.date} | {r.insider} ({r.relation or '?'}) | {r.text or ''} | shares "
              f"{_num(r.shares)} | value {_num(r.value)}" for r in ans.value[:50]]
    return ToolResult(status="ok", text="\n".join(lines), vendor=ans.vendor)


def _social(md, a: _Args) -> ToolResult:
    asked, sym = a.symbol("ticker")
    curr = a.date("curr_date")
    start = curr - dt.timedelta(days=a.int("look_back_days", 7, 1, 90))
    sections, found = [], []
    for vendor, posts in md.social(sym, start, curr, tool=a.name):
        if isinstance(posts, str):
            sections.append(f"## {vendor}: {posts}")
            continue
        found.append(vendor)
        sections.append(f"## {vendor} ({len(posts)} posts)")
        sections += [f"- {p.created:%Y-%m-%d %H:%M} {p.author or '?'}"
                     f"{f' [{p.sentiment}]' if p.sentiment else ''}: {p.text[:300]}"
                     for p in posts]
    if not found:
        return no_data(f"social posts for {_who(asked, sym)} between {start} and {curr}",
                       sections)
    return ToolResult(status="ok", text=f"# Social posts about {sym} {start}..{curr}\n"
                      + "\n".join(sections), vendor="+".join(found))


def _plain(v: float) -> str:
    """A value as FRED publishes it: up to three decimals, no trailing zeros."""
    return format(v, ",.3f").rstrip("0").rstrip(".")


def _series_ids(raw: Any) -> list[str]:
    """The requested series ids (a list or comma text), checked against MACRO_SERIES."""
    items = raw if isinstance(raw, list) else str(raw).replace(";", ",").split(",")
    ids = list(dict.fromkeys(str(i).strip().upper() for i in items if str(i).strip()))
    unknown = [i for i in ids if i not in MACRO_SERIES]
    if unknown:
        raise InvalidInput(f"unknown series {', '.join(unknown)}; valid series: "
                           + ", ".join(MACRO_SERIES))
    return ids[:6] or list(DEFAULT_MACRO)


def _macro_section(series_id: str, rows: list) -> list[str]:
    row, last = MACRO_SERIES[series_id], rows[-1]
    lines = [f"## {series_id}: {row.title} ({row.units}, {row.frequency})",
             f"latest: {_plain(last.value)} on {last.date}"]
    if len(rows) > 1:
        lines.append(f"previous: {_plain(rows[-2].value)} on {rows[-2].date}")
    year_ago = [o for o in rows if o.date <= last.date - dt.timedelta(days=365)]
    if year_ago:
        then = year_ago[-1]
        change = f"change {last.value - then.value:+,.3f}".rstrip("0").rstrip(".")
        if row.units != "percent" and row.units != "percentage points" and then.value:
            change += f", {100 * (last.value / then.value - 1):+.2f}%"
        lines.append(f"a year earlier: {_plain(then.value)} on {then.date} ({change})")
    return lines


def _macro(md, a: _Args) -> ToolResult:
    curr = a.date("curr_date")
    ids = _series_ids(a.raw.get("series") or [])
    sections, reasons, vendors = [], [], []
    for series_id in ids:
        try:
            ans = md.macro(series_id, curr, tool=a.name)
        except DataError as exc:  # context, not the core of a run: a note, never a failure
            reasons.append(f"{series_id}: unavailable ({exc})")
            continue
        if not ans.found:
            reasons.append(f"{series_id}: " + "; ".join(ans.reasons))
            continue
        vendors.append(ans.vendor)
        sections += _macro_section(series_id, ans.value)
    if not sections:
        return no_data(f"macro indicators ({', '.join(ids)}) as published by {curr}", reasons)
    vendor = "+".join(dict.fromkeys(vendors))
    head = [f"# Macro indicators as published by {curr} (vendor {vendor}; values dated on or "
            "before that day, later revisions excluded)"]
    tail = [f"(no data: {r})" for r in reasons]
    return ToolResult(status="ok", text="\n".join(head + sections + tail), vendor=vendor)


def _odds(p: Any) -> str:
    if not p.prices:
        return "no price quoted by the trade date"
    quoted = ", ".join(f"{o} {price:.2f}" for o, price in zip(p.outcomes, p.prices))
    return f"{quoted} (quoted {p.priced_at:%Y-%m-%d %H:%M} UTC)"


def _predictions(md, a: _Args) -> ToolResult:
    query = " ".join(str(a.get("query")).split())[:100]
    if not query:
        raise InvalidInput("query is empty; give a topic such as a company or 'Fed rate cut'")
    curr, limit = a.date("curr_date"), a.int("limit", 5, 1, 10)
    try:
        ans = md.predictions(query, curr, limit, tool=a.name)
    except DataError as exc:  # context, not the core of a run: a note, never a failure
        return no_data(f"prediction markets on {query!r} opened by {curr}",
                       [f"unavailable ({exc})"])
    if not ans.found:
        return no_data(f"prediction markets on {query!r} opened by {curr}", ans.reasons)
    lines = [f"# Prediction markets on {query!r} opened on or before {curr} (vendor "
             f"{ans.vendor}; prices are probabilities 0..1)"]
    for p in ans.value:
        closes = f" | closes {p.closes}" if p.closes else ""
        volume = f" | volume {_num(p.volume)}" if p.volume is not None else ""
        lines.append(f"- {p.question} | opened {p.created:%Y-%m-%d}{closes} | {_odds(p)}"
                     f"{volume}")
    return ToolResult(status="ok", text="\n".join(lines), vendor=ans.vendor)


@dataclass(frozen=True)
class Tool:
    """One analyst tool: what the model sees (``spec``), what answers it (``handler``) and
    which data category's vendor chain serves it (``category``)."""
    spec: ToolSpec
    handler: Callable[[Any, _Args], ToolResult]
    category: str

    @property
    def name(self) -> str:
        return self.spec.name


_STATEMENT_LABELS = (("balance_sheet", "Balance sheet"), ("cashflow", "Cash flow"),
                     ("income_statement", "Income"))

#: Every tool, once.
TOOLS: dict[str, Tool] = {t.name: t for t in [
    Tool(_spec("get_stock_data", "Daily OHLCV bars for a symbol between two dates (inclusive).",
               {"symbol": _S, "start_date": _DATE, "end_date": _DATE},
               ["symbol", "start_date", "end_date"]), _stock_data, "prices"),
    Tool(_spec("get_indicators", "Daily values of one technical indicator up to curr_date. "
               "Valid indicators: " + ", ".join(INDICATORS) + ".",
               {"symbol": _S, "indicator": {"type": "string", "enum": list(INDICATORS)},
                "curr_date": _DATE, "look_back_days": _days(30, "calendar days of values")},
               ["symbol", "indicator", "curr_date"]), _indicators, "indicators"),
    Tool(_spec("get_verified_market_snapshot", "Verified last bar, key indicators and recent "
               "closes on or before curr_date: the source of truth for exact numbers.",
               {"symbol": _S, "curr_date": _DATE, "look_back_days": _days(30, "closes to list")},
               ["symbol", "curr_date"]), _snapshot, "prices"),
    Tool(_spec("get_news", "Company news published between two dates.",
               {"ticker": _S, "start_date": _DATE, "end_date": _DATE},
               ["ticker", "start_date", "end_date"]), _news, "news"),
    Tool(_spec("get_global_news", "Macro and market news in the days before curr_date.",
               {"curr_date": _DATE, "look_back_days": _days(7, "calendar days"),
                "limit": {"type": "integer", "default": 10}}, ["curr_date"]),
         _global_news, "news"),
    Tool(_spec("get_fundamentals", "Key statistics (valuation, profitability) as of curr_date.",
               {"ticker": _S, "curr_date": _DATE}, ["ticker", "curr_date"]),
         _fundamentals, "fundamentals"),
    *[Tool(_spec(f"get_{k}", f"{label} statements with periods ended and filed by curr_date.",
                 {"ticker": _S, "freq": _FREQ, "curr_date": _DATE}, ["ticker", "curr_date"]),
           _statement, "fundamentals") for k, label in _STATEMENT_LABELS],
    Tool(_spec("get_insider_transactions", "Insider transactions on or before curr_date.",
               {"ticker": _S, "curr_date": _DATE}, ["ticker", "curr_date"]),
         _insider, "fundamentals"),
    Tool(_spec("get_macro_indicators", "Macro indicators from FRED (rates, inflation, jobs, "
               "yields) as published by curr_date: latest value, previous, a year earlier. "
               "Series: " + ", ".join(f"{k} ({v.title})" for k, v in MACRO_SERIES.items())
               + f". Default: {', '.join(DEFAULT_MACRO)}.",
               {"curr_date": _DATE, "series": {"type": "array", "items": {
                   "type": "string", "enum": list(MACRO_SERIES)},
                   "description": "FRED series ids (at most 6)"}}, ["curr_date"]),
         _macro, "macro"),
    Tool(_spec("get_prediction_markets", "Prediction-market odds (Polymarket) on a topic, "
               "from markets opened on or before curr_date, priced as of that day.",
               {"query": {"type": "string", "description": "a company, ticker or event, "
                          "e.g. 'NVIDIA' or 'Fed rate cut'"},
                "curr_date": _DATE, "limit": {"type": "integer", "default": 5}},
               ["query", "curr_date"]), _predictions, "predictions"),
    Tool(_spec("get_social_posts", "Recent Reddit and StockTwits posts about the ticker.",
               {"ticker": _S, "curr_date": _DATE, "look_back_days": _days(7, "calendar days")},
               ["ticker", "curr_date"]), _social, "social"),
]}
#: Derived: the spec of each tool (what the role actors hand the model).
TOOL_SPECS: dict[str, ToolSpec] = {n: t.spec for n, t in TOOLS.items()}


#: The calls an analyst's role makes by itself when its model cannot call tools (a small
#: local model): per analyst, (tool, arguments) with "TICKER", "DATE" and "START" (DATE less
#: the tool's look-back) filled in by ``default_calls``. Few and short: a small model's
#: context is small.
DEFAULT_CALLS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "market": (
        ("get_stock_data", {"symbol": "TICKER", "start_date": "START", "end_date": "DATE"}),
        ("get_indicators", {"symbol": "TICKER", "indicator": "rsi", "curr_date": "DATE",
                            "look_back_days": 7}),
        ("get_indicators", {"symbol": "TICKER", "indicator": "macdh", "curr_date": "DATE",
                            "look_back_days": 7}),
        ("get_indicators", {"symbol": "TICKER", "indicator": "close_50_sma",
                            "curr_date": "DATE", "look_back_days": 7}),
    ),
    "social": (
        ("get_social_posts", {"ticker": "TICKER", "curr_date": "DATE", "look_back_days": 7}),
        ("get_news", {"ticker": "TICKER", "start_date": "START", "end_date": "DATE"}),
    ),
    "news": (
        ("get_news", {"ticker": "TICKER", "start_date": "START", "end_date": "DATE"}),
        ("get_global_news", {"curr_date": "DATE", "look_back_days": 7, "limit": 5}),
        ("get_insider_transactions", {"ticker": "TICKER", "curr_date": "DATE"}),
    ),
    "fundamentals": (
        ("get_fundamentals", {"ticker": "TICKER", "curr_date": "DATE"}),
        ("get_income_statement", {"ticker": "TICKER", "freq": "quarterly", "curr_date": "DATE"}),
        ("get_balance_sheet", {"ticker": "TICKER", "freq": "quarterly", "curr_date": "DATE"}),
        ("get_insider_transactions", {"ticker": "TICKER", "curr_date": "DATE"}),
    ),
}
DEFAULT_LOOK_BACK_DAYS = {"get_stock_data": 14, "get_news": 7}


def default_calls(role: str, ticker: str, trade_date: dt.date) -> list[tuple[str, dict]]:
    """The default tool calls of analyst ``role`` for ``ticker`` on ``trade_date``."""
    out = []
    for name, template in DEFAULT_CALLS.get(role, ()):
        start = trade_date - dt.timedelta(days=DEFAULT_LOOK_BACK_DAYS.get(name, 30))
        fill = {"TICKER": ticker, "DATE": trade_date.isoformat(), "START": start.isoformat()}
        out.append((name, {k: fill.get(v, v) if isinstance(v, str) else v
                           for k, v in template.items()}))
    return out
