"""yfinance vendor: Yahoo prices, identity, key stats, statements, news and insider rows.

Why the shape: Yahoo throttles hard, so a rate-limit answer is retried a bounded number of
times with configurable (test-small) delays, then reported as RateLimited so the router
moves on. A 404 or an empty frame means Yahoo has nothing: NoData, never a crash. The
optional ``requests.Session`` is handed to yfinance so callers (and tests at the network
boundary) control the transport. Without one, ``TA_ACTORS_YAHOO_ARCHIVE=<folder>`` (or
``archive=``) replays recorded Yahoo responses instead of the network (see yahoo_archive)."""
from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from events.settings import setting

from ..frames import normalize_bars
from ..model import Fundamentals, InsiderTx, NewsItem, NoData, Period, RateLimited, present
from .base import Vendor, as_date
from .yahoo_archive import ARCHIVE_ENV, ArchiveAdapter, archive_session

KEY_STATS = ("marketCap", "enterpriseValue", "trailingPE", "forwardPE", "pegRatio",
             "priceToBook", "priceToSalesTrailing12Months", "trailingEps", "forwardEps",
             "dividendYield", "payoutRatio", "beta", "profitMargins", "operatingMargins",
             "grossMargins", "returnOnEquity", "returnOnAssets", "debtToEquity", "currentRatio",
             "quickRatio", "totalRevenue", "revenueGrowth", "earningsGrowth", "freeCashflow",
             "totalCash", "totalDebt", "sharesOutstanding", "fiftyTwoWeekHigh",
             "fiftyTwoWeekLow", "recommendationKey", "targetMeanPrice")
_STATEMENT_METHOD = {"income": "get_income_stmt", "balance": "get_balance_sheet",
                     "cashflow": "get_cash_flow"}
GLOBAL_QUERIES = ("stock market", "economy", "federal reserve")


class YFinanceVendor(Vendor):
    name = "yfinance"
    remote = True

    def __init__(self, session: Any = None, retry_delays: Sequence[float] = (1.0, 4.0, 10.0),
                 archive: str | Path | None = None):
        self.retry_delays = tuple(retry_delays)
        #: The ArchiveAdapter when replaying recorded responses (then nothing goes online).
        self.replay = None
        if archive is None and session is None:
            archive = setting(ARCHIVE_ENV)
        if archive:
            self.replay = ArchiveAdapter(archive)
            session = archive_session(self.replay)
        self.session = session

    def _ticker(self, symbol: str):
        import yfinance as yf
        return yf.Ticker(symbol, session=self.session) if self.session else yf.Ticker(symbol)

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        from yfinance.exceptions import YFRateLimitError, YFTickerMissingError
        for attempt in range(len(self.retry_delays) + 1):
            try:
                return fn()
            except YFRateLimitError:
                if attempt == len(self.retry_delays):
                    raise RateLimited(
                        f"Yahoo rate limit on {what} after {attempt + 1} tries") from None
                time.sleep(self.retry_delays[attempt])
            except YFTickerMissingError as exc:
                raise NoData(f"{what}: {exc}") from exc
            except Exception as exc:
                status = getattr(getattr(exc, "response", None), "status_code", None)
                if status == 404:
                    raise NoData(f"Yahoo has no {what} (HTTP 404)") from exc
                if status == 429:
                    raise RateLimited(f"Yahoo HTTP 429 on {what}") from exc
                raise

    def prices(self, symbol: str, start: dt.date, end: dt.date):
        frame = self._call(f"prices for {symbol}", lambda: self._ticker(symbol).history(
            start=start.isoformat(), end=(end + dt.timedelta(days=1)).isoformat(),
            interval="1d", auto_adjust=True, actions=False, raise_errors=True))
        bars = normalize_bars(frame)
        if bars.empty:
            raise NoData(f"no bars for {symbol} between {start} and {end}")
        return bars

    def _info(self, symbol: str) -> dict:
        info = self._call(f"profile of {symbol}", lambda: self._ticker(symbol).info) or {}
        if not info or len(info) <= 1:
            raise NoData(f"no profile for {symbol}")
        return info

    def identity(self, symbol: str) -> dict:
        info = self._info(symbol)
        def first(*keys: str) -> str | None:  # a placeholder long name falls to the short
            return next((v for v in map(present, map(info.get, keys)) if v), None)
        return {"name": first("longName", "shortName"), "sector": first("sector"),
                "industry": first("industry"),
                "exchange": first("fullExchangeName", "exchange"), "currency": first("currency")}

    def fundamentals(self, symbol: str, as_of: dt.date) -> Fundamentals:
        info = self._info(symbol)
        values = {k: info[k] for k in KEY_STATS if info.get(k) is not None}
        # Yahoo's key statistics are live: true today, not on a past trade date.
        return Fundamentals(as_of=dt.date.today(), values=values)

    def statement(self, symbol: str, kind: str, freq: str) -> list[Period]:
        frame = self._call(f"{freq} {kind} statement for {symbol}", lambda: getattr(
            self._ticker(symbol), _STATEMENT_METHOD[kind])(pretty=True, freq="yearly" if freq == "annual" else freq))
        if frame is None or frame.empty:
            raise NoData(f"no {freq} {kind} statement for {symbol}")
        periods = []
        for col in frame.columns:
            end = as_date(col)
            if end is None:  # a column without a period end says nothing datable
                continue
            values = {str(k): (None if v != v else float(v)) for k, v in frame[col].items()}
            periods.append(Period(period_end=end, values=values))
        return periods

    def insider(self, symbol: str) -> list[InsiderTx]:
        frame = self._call(f"insider transactions for {symbol}",
                           lambda: self._ticker(symbol).insider_transactions)
        if frame is None or frame.empty:
            raise NoData(f"no insider transactions for {symbol}")
        rows = []
        for _, r in frame.iterrows():
            day = as_date(r.get("Start Date"))
            if day is None:
                continue
            rows.append(InsiderTx(
                date=day, insider=str(r.get("Insider") or "?"), relation=r.get("Position"),
                text=r.get("Text") or r.get("Transaction") or None,
                shares=_float(r.get("Shares")), value=_float(r.get("Value"))))
        return rows

    def _search_news(self, query: str, count: int) -> list[NewsItem]:
        import yfinance as yf
        kwargs = {"session": self.session} if self.session else {}
        found = self._call(f"news for {query!r}", lambda: yf.Search(
            query, max_results=0, news_count=count, **kwargs).news)
        items = []
        for n in found or []:
            ts = n.get("providerPublishTime")
            if not ts or not n.get("title"):
                continue
            items.append(NewsItem(published=dt.datetime.fromtimestamp(ts, dt.timezone.utc),
                                  title=n["title"], publisher=n.get("publisher"),
                                  summary=n.get("summary"), link=n.get("link")))
        return items

    def news(self, symbol: str, start: dt.date, end: dt.date) -> list[NewsItem]:
        items = self._search_news(symbol, 20)
        if not items:
            raise NoData(f"no news for {symbol}")
        return items

    def global_news(self, start: dt.date, end: dt.date, limit: int) -> list[NewsItem]:
        seen, items = set(), []
        for query in GLOBAL_QUERIES:
            for item in self._search_news(query, limit):
                if item.title not in seen:
                    seen.add(item.title)
                    items.append(item)
        if not items:
            raise NoData("no global news")
        return items


def _float(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if out != out else out
