"""MarketData: the one object actors talk to for market facts.

It owns the vendor chains, the download cache and the look-ahead guards. Every fetch below
filters to the trade date itself, whatever the vendor returned, so a vendor that ignores the
requested range can never leak the future into a run."""
from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from events.config import VENDOR_CATEGORIES, InvalidInput, complete_chains
from events.records import Instrument, MarketSnapshot, ToolResult
from events.settings import setting

from . import snapshot as snap
from .frames import between
from .indicators import compute_many
from .limits import VENDOR_RATES, Throttle, ThrottledVendor
from .macro import MACRO_HISTORY_DAYS
from .model import NoData, day_of, present
from .router import Answer, DataError, route
from .symbols import benchmark_for as _benchmark_for
from .symbols import to_yahoo

if TYPE_CHECKING:
    import requests

__all__ = ["MarketData", "DataError"]
VENDOR_NAMES = tuple(VENDOR_CATEGORIES)


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


#: Past-window answers a replica keeps (bars, indicators), most recently used first. A run
#: makes ~15 (its bars, the snapshot's indicators, then the market analyst's, which the
#: snapshot already computed): 2,048 (~25 MB) keep 128 runs' answers from being evicted
#: between their snapshot and their analyst's tools.
MEMO_SIZE = 2048


class MarketData:
    def __init__(self, vendors: Mapping[str, Sequence[str]] | None = None,
                 tool_vendors: Mapping[str, Sequence[str]] | None = None,
                 data_dir: str | None = None, cache_path: str | None = None,
                 session: "requests.Session | None" = None, *,
                 retry_delays: Sequence[float] = (1.0, 4.0, 10.0),
                 throttle: "Throttle | None" = None,
                 max_stale_days: int = snap.MAX_STALE_DAYS):
        self.vendors = complete_chains({k: tuple(v) for k, v in (vendors or {}).items()})
        self.tool_vendors = {k: tuple(v) for k, v in (tool_vendors or {}).items()}
        for chain in [*self.vendors.values(), *self.tool_vendors.values()]:
            for name in chain:
                if name not in VENDOR_NAMES:
                    raise InvalidInput(f"unknown data vendor {name!r}; known vendors: "
                                       + ", ".join(VENDOR_NAMES))
        self.data_dir, self.session, self.retry_delays = data_dir, session, tuple(retry_delays)
        self.throttle = throttle  # vendor rate limits shared by every replica (data.limits)
        self.max_stale_days = max_stale_days  # snapshot freshness (RunConfig.max_stale_days)
        self._cache = None
        if cache_path:
            from .cache import Cache
            self._cache = Cache(cache_path)
        self._instances: dict[str, Any] = {}
        self._memo: OrderedDict[tuple, Any] = OrderedDict()
        self._memo_lock = threading.Lock()

    # -- vendors ---------------------------------------------------------------------------
    def _vendor(self, name: str) -> Any:
        if name not in self._instances:
            self._instances[name] = self._make(name)
        return self._instances[name]

    def _limited(self, vendor: Any) -> Any:
        """Calls that reach a remote vendor wait for its rate (cache hits never do)."""
        if self.throttle is None or vendor.name not in VENDOR_RATES:
            return vendor
        return ThrottledVendor(vendor, self.throttle)

    def _make(self, name: str) -> Any:
        if name == "local":
            from .vendors.local import LocalVendor
            return LocalVendor(self.data_dir)
        if name == "synthetic":
            from .vendors.synthetic import SyntheticVendor
            return SyntheticVendor()
        if name == "yfinance":
            from .vendors.yfinance_vendor import YFinanceVendor
            vendor: Any = YFinanceVendor(session=self.session, retry_delays=self.retry_delays)
            if vendor.replay is not None:
                return vendor  # replayed answers are local already: keep them out of the cache
        elif name == "alpha_vantage":
            from .vendors.alpha_vantage import AlphaVantageVendor
            vendor = AlphaVantageVendor(setting("ALPHA_VANTAGE_API_KEY"), self.session)
        elif name == "reddit":
            from .vendors.reddit import RedditVendor
            return self._limited(RedditVendor(self.session))
        elif name == "fred":
            from .vendors.fred import FredVendor
            return self._limited(FredVendor(setting("FRED_API_KEY"), self.session))
        elif name == "polymarket":
            from .vendors.polymarket import PolymarketVendor
            return self._limited(PolymarketVendor(self.session))
        else:
            from .vendors.stocktwits import StocktwitsVendor
            return self._limited(StocktwitsVendor(self.session))
        vendor = self._limited(vendor)
        if self._cache is not None:
            from .cache import CachedVendor
            return CachedVendor(vendor, self._cache)
        return vendor

    def chain(self, category: str, tool: str | None = None) -> list[Any]:
        names = self.tool_vendors.get(tool) if tool else None
        return [self._vendor(n) for n in (names or self.vendors.get(category, ()))]

    def _route(self, category: str, tool: str | None, capability: str,
               call: Callable[[Callable], Any], what: str) -> Answer:
        return route(self.chain(category, tool), capability, call, what)

    def _memoized(self, key: tuple, end: dt.date, make: Callable[[], Any]) -> Any:
        """``make()``, kept for the same ``key`` when its window ended before today (a past
        window never changes): a run asks for the same bars, snapshot and indicators several
        times (context, then the market analyst's tools). Errors are never kept."""
        if end >= dt.date.today():
            return make()
        with self._memo_lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        value = make()
        with self._memo_lock:
            self._memo[key] = value
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return value

    # -- guarded fetches (each drops whatever is after the trade date) ---------------------
    def bars(self, symbol: str, start: dt.date, end: dt.date, *, category: str = "prices",
             tool: str | None = None) -> Answer:
        def call(fn):
            got = between(fn(symbol, start, end), start, end)
            if got.empty:
                raise NoData(f"no bars between {start} and {end}")
            return got
        return self._memoized(
            ("bars", symbol, start, end, self._chain_names(category, tool)), end,
            lambda: self._route(category, tool, "prices", call, f"prices for {symbol}"))

    def indicator(self, symbol: str, start: dt.date, end: dt.date, name: str, bars: Any, *,
                  vendor: str) -> Any:
        """The named indicator over ``bars``, the answer of ``vendor`` for (symbol, start, end)."""
        return self.indicators(symbol, start, end, [name], bars, vendor=vendor)[
            name.strip().lower()]

    def indicators(self, symbol: str, start: dt.date, end: dt.date, names: Iterable[str],
                   bars: Any, *, vendor: str) -> dict:
        """Several indicators over those bars: each kept once computed (past windows; keyed by
        the vendor whose bars they are), the missing ones computed together (shared MACD and
        Bollinger computations)."""
        keys = [n.strip().lower() for n in names]
        out = {k: self._memo.get(("indicator", symbol, start, end, vendor, k)) for k in keys}
        missing = [k for k, v in out.items() if v is None]
        if missing:
            for key, series in compute_many(missing, bars).items():
                out[key] = self._memoized(("indicator", symbol, start, end, vendor, key), end,
                                          _constant(series))
        return out

    def _chain_names(self, category: str, tool: str | None) -> tuple[str, ...]:
        """The vendors that answer: the memo's key (a tool without its own chain shares)."""
        names = self.tool_vendors.get(tool) if tool else None
        return tuple(names or self.vendors.get(category, ()))

    def statement(self, symbol: str, kind: str, freq: str, trade_date: dt.date,
                  tool: str | None = None) -> Answer:
        def call(fn):
            periods = [p for p in fn(symbol, kind, freq) if p.period_end <= trade_date
                       and (p.filed is None or p.filed <= trade_date)]
            if not periods:
                raise NoData(f"no {freq} {kind} statement ended and filed by {trade_date}")
            return sorted(periods, key=lambda p: p.period_end, reverse=True)
        return self._route("fundamentals", tool, "statement", call,
                           f"{freq} {kind} statement for {symbol}")

    def fundamentals(self, symbol: str, trade_date: dt.date, tool: str | None = None) -> Answer:
        def call(fn):
            got = fn(symbol, trade_date)
            as_of = got.as_of or dt.date.today()
            if as_of > trade_date:
                raise NoData(f"key statistics are as of {as_of}, after trade date {trade_date}")
            if not got.values:
                raise NoData("no key statistics")
            return got
        return self._route("fundamentals", tool, "fundamentals", call,
                           f"fundamentals for {symbol}")

    def news(self, symbol: str | None, start: dt.date, end: dt.date, limit: int = 20,
             tool: str | None = None) -> Answer:
        def call(fn):
            raw = fn(symbol, start, end) if symbol else fn(start, end, limit)
            items = [n for n in raw if start <= day_of(n.published) <= end]
            if not items:
                raise NoData(f"no news published between {start} and {end}")
            return sorted(items, key=lambda n: n.published, reverse=True)[:limit]
        capability = "news" if symbol else "global_news"
        return self._route("news", tool, capability, call, f"news for {symbol or 'markets'}")

    def insider(self, symbol: str, trade_date: dt.date, tool: str | None = None) -> Answer:
        def call(fn):
            rows = [r for r in fn(symbol) if r.date <= trade_date]
            if not rows:
                raise NoData(f"no insider transactions on or before {trade_date}")
            return sorted(rows, key=lambda r: r.date, reverse=True)
        return self._route("fundamentals", tool, "insider", call,
                           f"insider transactions for {symbol}")

    def macro(self, series_id: str, trade_date: dt.date, tool: str | None = None) -> Answer:
        """Observations of one macro series as published by the trade date, dated on or
        before it (the last ``MACRO_HISTORY_DAYS`` days of them)."""
        start = trade_date - dt.timedelta(days=MACRO_HISTORY_DAYS)

        def call(fn):
            rows = [o for o in fn(series_id, start, trade_date, trade_date)
                    if start <= o.date <= trade_date]
            if not rows:
                raise NoData(f"no {series_id} observations on or before {trade_date}")
            return sorted(rows, key=lambda o: o.date)
        return self._route("macro", tool, "macro", call, f"macro series {series_id}")

    def predictions(self, query: str, trade_date: dt.date, limit: int = 5,
                    tool: str | None = None) -> Answer:
        """Prediction markets matching ``query`` that opened on or before the trade date,
        with odds only as quoted by then."""
        def call(fn):
            kept = []
            for market in fn(query, trade_date, limit):
                if day_of(market.created) > trade_date:
                    continue
                if market.priced_at is not None and day_of(market.priced_at) > trade_date:
                    market = market.model_copy(update={"prices": (), "priced_at": None})
                kept.append(market)
            if not kept:
                raise NoData(f"no prediction market on {query!r} opened by {trade_date}")
            return kept[:limit]
        return self._route("predictions", tool, "predictions", call,
                           f"prediction markets on {query!r}")

    def social(self, symbol: str, start: dt.date, end: dt.date,
               tool: str | None = None) -> list[tuple[str, list | str]]:
        """Every social vendor is asked (not just the first): the sentiment analyst wants both
        Reddit and StockTwits. A failing vendor yields an "unavailable" line, never an error."""
        out: list[tuple[str, list | str]] = []
        for vendor in self.chain("social", tool):
            fn = getattr(vendor, "social", None)
            if fn is None:
                continue
            try:
                posts = [p for p in fn(symbol, start, end) if start <= day_of(p.created) <= end]
                out.append((vendor.name, sorted(posts, key=lambda p: p.created, reverse=True)
                            or f"no posts between {start} and {end}"))
            except NoData as exc:
                out.append((vendor.name, f"no posts ({' '.join(str(exc).split())[:200]})"))
            except Exception as exc:
                out.append((vendor.name, f"unavailable ({' '.join(str(exc).split())[:200]})"))
        return out

    # -- the contract ----------------------------------------------------------------------
    def call_tool(self, name: str, arguments: dict, trade_date: dt.date) -> ToolResult:
        from .tools import dispatch
        return dispatch(self, name, arguments, trade_date)

    def snapshot(self, ticker: str, trade_date: dt.date, n_closes: int = 30,
                 tool: str | None = None) -> MarketSnapshot | None:
        """The verified snapshot, from the first vendor of the chain whose bars are fresh (a
        stale vendor hands over to the next, like one without data); None without bars;
        StalePrices (a NoData, with the note to record) when every vendor's bars are stale."""
        symbol = to_yahoo(ticker)
        start = snap.history_start(trade_date)

        def call(fn: Callable, vendor: str) -> Any:
            got = between(fn(symbol, start, trade_date), start, trade_date)
            if got.empty:
                raise NoData(f"no bars between {start} and {trade_date}")
            snap.check_fresh(symbol, vendor, got.index[-1].date(), trade_date,
                             self.max_stale_days)
            return got
        answer = self._memoized(
            ("fresh bars", symbol, start, trade_date, self._chain_names("prices", tool),
             self.max_stale_days), trade_date,
            lambda: route(self.chain("prices", tool), "prices", call, f"prices for {symbol}",
                          with_name=True))
        if not answer.found:
            stale = [r.split(": ", 1)[1] for r in answer.reasons if ": stale prices for " in r]
            if stale:
                raise snap.StalePrices(stale[0])
            return None
        vendor = str(answer.vendor)
        return snap.build(symbol, trade_date, answer.value, vendor, n_closes,
                          compute_fn=lambda names, bars: self.indicators(
                              symbol, start, trade_date, names, bars, vendor=vendor),
                          max_stale_days=self.max_stale_days)

    def identity(self, ticker: str) -> Instrument:
        ticker = str(ticker or "").strip().upper()
        try:
            symbol = to_yahoo(ticker)
        except InvalidInput as exc:
            return Instrument(ticker=str(ticker), symbol=str(ticker), available=False,
                              note=str(exc))

        def call(fn):
            info = {k: present(v) for k, v in (fn(symbol) or {}).items()}
            if not info.get("name"):  # "None", "n/a", "-" ... are no name
                raise NoData("no name known")
            return info
        try:
            answer = self._route("identity", None, "identity", call, f"identity of {symbol}")
        except DataError as exc:
            return Instrument(ticker=ticker, symbol=symbol, available=False, note=str(exc))
        if not answer.found:
            return Instrument(ticker=ticker, symbol=symbol, available=False,
                              note=f"no vendor knew {ticker!r} (tried as {symbol!r}): "
                                   + "; ".join(answer.reasons))
        fields: dict[str, Any] = {k: answer.value.get(k) for k in (
            "name", "sector", "industry", "exchange", "currency")}
        return Instrument(ticker=ticker, symbol=symbol, vendor=answer.vendor, **fields)

    def closes(self, symbol: str, start: dt.date, end: dt.date) -> list[tuple[dt.date, float]]:
        answer = self.bars(to_yahoo(symbol), start, end)
        if not answer.found:
            return []
        return [(ts.date(), float(c)) for ts, c in answer.value["close"].items()]

    def benchmark_for(self, ticker: str, configured: str | None = None) -> str:
        return _benchmark_for(ticker, configured)
