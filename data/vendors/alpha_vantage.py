"""Alpha Vantage vendor (optional; needs ALPHA_VANTAGE_API_KEY).

Why: a second source for the same categories when Yahoo throttles. Without a key it is "not
configured" (skipped, not an error). Alpha Vantage answers most refusals with HTTP 200 and a
"Note", "Information" or "Error Message" field instead of data, so the text decides what the
refusal is: throttling (per minute or the daily quota) is RateLimited, so the router moves
on; a missing, invalid or demo key is AuthFailed naming ALPHA_VANTAGE_API_KEY (waiting would
never help); anything else is NoData. Throttle notes also mention "your API key", so they
are matched first."""
from __future__ import annotations

import datetime as dt
from typing import Any

from ..frames import normalize_bars
from ..model import (AuthFailed, Fundamentals, InsiderTx, NewsItem, NoData, NotConfigured, Period,
                     RateLimited)
from .base import Vendor

URL = "https://www.alphavantage.co/query"
_STATEMENT = {"income": "INCOME_STATEMENT", "balance": "BALANCE_SHEET", "cashflow": "CASH_FLOW"}


KEY_ENV = "ALPHA_VANTAGE_API_KEY"
#: Phrases of Alpha Vantage's refusals, checked in this order (first match wins).
_REFUSALS: tuple[tuple[tuple[str, ...], type[Exception]], ...] = (
    (("rate limit", "call frequency", "requests per day", "requests per minute",
      "calls per minute", "calls per day", "call volume", "spreading out your"), RateLimited),
    (("api key", "apikey", "api_key"), AuthFailed),
)


def refusal(field: str, message: str) -> Exception:
    """The exception for a refusal reply ``{field: message}`` (see the module docstring)."""
    text = " ".join(str(message).split())
    lowered = text.lower()
    for phrases, kind in _REFUSALS:
        if any(p in lowered for p in phrases):
            if kind is AuthFailed:
                return AuthFailed(f"Alpha Vantage refused the key in {KEY_ENV}: {text[:200]}")
            return kind(text[:200])
    if field == "Note":  # Alpha Vantage's older replies: "Note" was only ever the throttle
        return RateLimited(text[:200])
    return NoData(text[:200])


def _f(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _stamp(day: dt.date) -> str:
    return day.strftime("%Y%m%dT0000")


class AlphaVantageVendor(Vendor):
    name = "alpha_vantage"
    remote = True

    def __init__(self, api_key: str | None, session: Any = None, timeout: float = 30):
        self.api_key, self.session, self.timeout = api_key, session, timeout

    def _get(self, **params: Any) -> dict:
        if not self.api_key:
            raise NotConfigured(f"{KEY_ENV} is not set")
        import requests
        http = self.session or requests
        resp = http.get(URL, params={**params, "apikey": self.api_key}, timeout=self.timeout)
        if resp.status_code == 429:
            raise RateLimited("HTTP 429")
        if resp.status_code in (401, 403):
            raise AuthFailed(f"Alpha Vantage refused the key in {KEY_ENV}: HTTP "
                             f"{resp.status_code}")
        resp.raise_for_status()
        data = resp.json()
        for field in ("Note", "Information", "Error Message"):
            if isinstance(data, dict) and field in data:
                raise refusal(field, data[field])
        return data

    def prices(self, symbol: str, start: dt.date, end: dt.date):
        import pandas as pd
        series = self._get(function="TIME_SERIES_DAILY", symbol=symbol,
                           outputsize="full").get("Time Series (Daily)") or {}
        rows = [{"date": day, "open": v.get("1. open"), "high": v.get("2. high"),
                 "low": v.get("3. low"), "close": v.get("4. close"),
                 "volume": v.get("5. volume")} for day, v in series.items()]
        bars = normalize_bars(pd.DataFrame(rows)) if rows else normalize_bars(None)
        if bars.empty:
            raise NoData(f"no daily series for {symbol}")
        return bars

    def identity(self, symbol: str) -> dict:
        o = self._get(function="OVERVIEW", symbol=symbol)
        if not o.get("Name"):
            raise NoData(f"no overview for {symbol}")
        return {"name": o.get("Name"), "sector": o.get("Sector"), "industry": o.get("Industry"),
                "exchange": o.get("Exchange"), "currency": o.get("Currency")}

    def fundamentals(self, symbol: str, as_of: dt.date) -> Fundamentals:
        o = self._get(function="OVERVIEW", symbol=symbol)
        skip = {"Symbol", "Name", "Description", "Address", "CIK", "OfficialSite"}
        values = {k: (_f(v) if _f(v) is not None else v) for k, v in o.items()
                  if k not in skip and v not in (None, "None", "-")}
        if not values:
            raise NoData(f"no overview for {symbol}")
        return Fundamentals(as_of=dt.date.today(), values=values)  # live numbers

    def statement(self, symbol: str, kind: str, freq: str) -> list[Period]:
        data = self._get(function=_STATEMENT[kind], symbol=symbol)
        reports = data.get("annualReports" if freq == "annual" else "quarterlyReports") or []
        return [Period(period_end=dt.date.fromisoformat(r["fiscalDateEnding"]),
                       values={k: _f(v) for k, v in r.items()
                               if k not in ("fiscalDateEnding", "reportedCurrency")})
                for r in reports if r.get("fiscalDateEnding")]

    def insider(self, symbol: str) -> list[InsiderTx]:
        rows = self._get(function="INSIDER_TRANSACTIONS", symbol=symbol).get("data") or []
        out = []
        for r in rows:
            shares, price = _f(r.get("shares")), _f(r.get("share_price"))
            side = {"A": "Acquisition", "D": "Disposal"}.get(r.get("acquisition_or_disposal"))
            out.append(InsiderTx(
                date=dt.date.fromisoformat(r["transaction_date"]),
                insider=r.get("executive") or "?", relation=r.get("executive_title"),
                text=f"{side or '?'} of {r.get('security_type') or 'shares'}", shares=shares,
                value=shares * price if shares is not None and price is not None else None))
        return out

    def _news(self, **params: Any) -> list[NewsItem]:
        feed = self._get(function="NEWS_SENTIMENT", sort="LATEST", **params).get("feed") or []
        return [NewsItem(published=dt.datetime.strptime(n["time_published"], "%Y%m%dT%H%M%S")
                         .replace(tzinfo=dt.timezone.utc), title=n.get("title") or "",
                         publisher=n.get("source"), summary=n.get("summary"), link=n.get("url"))
                for n in feed if n.get("time_published")]

    def news(self, symbol: str, start: dt.date, end: dt.date) -> list[NewsItem]:
        return self._news(tickers=symbol, time_from=_stamp(start),
                          time_to=_stamp(end + dt.timedelta(days=1)), limit=50)

    def global_news(self, start: dt.date, end: dt.date, limit: int) -> list[NewsItem]:
        return self._news(topics="financial_markets,economy_macro", time_from=_stamp(start),
                          time_to=_stamp(end + dt.timedelta(days=1)), limit=max(limit, 50))
