"""Synthetic vendor: deterministic, clearly labelled data so demos and tests run anywhere.

Every series is seeded by the ticker through sha256 (stable across processes) and generated
forward from 2015, so the bar for a given day never depends on how far the series was drawn.
Every text it produces says "synthetic" so nobody mistakes it for market facts."""
from __future__ import annotations

import datetime as dt
import hashlib
from functools import lru_cache

from ..frames import between
from ..macro import MACRO_SERIES
from ..model import Fundamentals, InsiderTx, NewsItem, NoData, Observation, Period, Post, Prediction
from .base import Vendor, stable_seed

START = dt.date(2015, 1, 2)
_HEADLINES = (
    "{t} (synthetic) announces a product update",
    "Analysts (synthetic) revisit their view on {t}",
    "{t} (synthetic) shares move on sector rotation",
    "{t} (synthetic) schedules its quarterly earnings call",
    "Synthetic report: {t} supply chain commentary",
)
_GLOBAL = ("Synthetic macro: central bank holds rates", "Synthetic macro: inflation print in line",
           "Synthetic macro: bond yields drift", "Synthetic macro: equity indices mixed")
_MOODS = ("bullish", "bearish", "neutral")
#: Observation dates of a synthetic macro series, and the days until each is published.
_STEPS = {"daily": ("B", 1), "weekly": ("W-FRI", 6), "monthly": ("MS", 45),
          "quarterly": ("QS", 90)}
_QUESTIONS = ("Will {q} (synthetic) close this month higher?",
              "Will {q} (synthetic) beat its next earnings estimate?",
              "Will the Fed (synthetic) cut rates at its next meeting?")


#: Symbols whose series stay cached: a batch of 64 tickers must not evict its own series
#: (about 250 KB each).
CACHED_SYMBOLS = 128


@lru_cache(maxsize=CACHED_SYMBOLS)
def _series(symbol: str, until: dt.date):
    import numpy as np
    import pandas as pd
    rng = np.random.default_rng(stable_seed("synthetic-prices", symbol))
    days = pd.bdate_range(START, until, name="date")
    n = len(days)
    drift = rng.uniform(-0.0002, 0.0008)
    vol = rng.uniform(0.012, 0.03)
    start_price = rng.uniform(20, 400)
    rets = rng.normal(drift, vol, n)
    gaps = rng.normal(0, vol / 3, n)
    wick = np.abs(rng.normal(0, vol / 2, (2, n)))
    volume = rng.lognormal(15, 0.4, n)
    close = start_price * np.exp(np.cumsum(rets))
    open_ = np.concatenate([[start_price], close[:-1]]) * np.exp(gaps)
    high = np.maximum(open_, close) * np.exp(wick[0])
    low = np.minimum(open_, close) * np.exp(-wick[1])
    return pd.DataFrame({"open": open_, "high": high, "low": low, "close": close,
                         "volume": np.round(volume)}, index=days)


@lru_cache(maxsize=8 * CACHED_SYMBOLS)  # a few kinds of event days per symbol
def _days(start: dt.date, end: dt.date, every: int, salt: str, symbol: str
          ) -> tuple[dt.date, ...]:
    """Deterministic event days: roughly one per ``every`` calendar days, fixed per symbol
    (cached: one sha256 per calendar day adds up to most of a run's data work)."""
    prefix = hashlib.sha256(f"{salt}|{symbol}|".encode())  # == stable_seed(salt, symbol, day)
    out, day = [], start
    while day <= end:
        if day.weekday() < 5:
            digest = prefix.copy()
            digest.update(str(day).encode())
            if int.from_bytes(digest.digest()[:8], "big") % every == 0:
                out.append(day)
        day += dt.timedelta(days=1)
    return tuple(out)


@lru_cache(maxsize=32)
def _macro_series(series_id: str, until: dt.date) -> tuple[Observation, ...]:
    """The whole synthetic series from START (computed once per process and day)."""
    import pandas as pd
    row = MACRO_SERIES[series_id]
    out = []
    for ts in pd.date_range(START, until, freq=_STEPS[row.frequency][0]):
        day = ts.date()
        wave = (stable_seed("macro", series_id, day.year, day.month) % 200 - 100) / 2000
        out.append(Observation(date=day, value=round(row.level * (1 + wave), 3)))
    return tuple(out)


class SyntheticVendor(Vendor):
    name = "synthetic"

    def prices(self, symbol: str, start: dt.date, end: dt.date):
        bars = between(_series(symbol, dt.date.today()), start, end)
        if bars.empty:
            raise NoData(f"no bars between {start} and {end} (series starts {START})")
        return bars

    def identity(self, symbol: str) -> dict:
        return {"name": f"{symbol} (synthetic)", "sector": "Synthetic", "industry": "Synthetic",
                "exchange": "SYNTH", "currency": "USD"}

    def fundamentals(self, symbol: str, as_of: dt.date) -> Fundamentals:
        bars = self.prices(symbol, START, as_of)
        price = float(bars["close"].iloc[-1])
        seed = stable_seed("synthetic-fund", symbol)
        shares = 1e8 * (1 + seed % 50)
        eps = price / (10 + seed % 30)
        return Fundamentals(as_of=as_of, values={
            "note": "synthetic numbers, not market data", "price": round(price, 2),
            "shares_outstanding": shares, "market_cap": round(price * shares),
            "eps_ttm": round(eps, 2), "pe_ttm": round(price / eps, 2),
            "dividend_yield": round((seed % 40) / 1000, 3)})

    def statement(self, symbol: str, kind: str, freq: str) -> list[Period]:
        import pandas as pd
        step = "QE" if freq == "quarterly" else "YE"
        ends = pd.date_range(START, dt.date.today(), freq=step)
        base = 1e9 * (1 + stable_seed("synthetic-stmt", symbol) % 20)
        scale = 1 if freq == "quarterly" else 4
        out = []
        for i, end in enumerate(ends):
            g = base * scale * (1.02 ** (i if freq == "quarterly" else 4 * i))
            values = {
                "income": {"Total Revenue (synthetic)": g, "Net Income (synthetic)": 0.15 * g},
                "balance": {"Total Assets (synthetic)": 5 * g, "Total Debt (synthetic)": g},
                "cashflow": {"Operating Cash Flow (synthetic)": 0.2 * g,
                             "Free Cash Flow (synthetic)": 0.12 * g},
            }[kind]
            out.append(Period(period_end=end.date(), filed=end.date() + dt.timedelta(days=35),
                              values={k: round(v, 2) for k, v in values.items()}))
        return out

    def insider(self, symbol: str) -> list[InsiderTx]:
        return [InsiderTx(date=d, insider=f"Synthetic Insider {stable_seed(symbol, d) % 5}",
                          relation="Officer (synthetic)", text="Synthetic sale",
                          shares=float(1000 + stable_seed("sh", symbol, d) % 9000))
                for d in _days(START, dt.date.today(), 45, "insider", symbol)]

    def news(self, symbol: str, start: dt.date, end: dt.date) -> list[NewsItem]:
        return [NewsItem(published=dt.datetime.combine(d, dt.time(13), dt.timezone.utc),
                         title=_HEADLINES[stable_seed("h", symbol, d) % len(_HEADLINES)]
                         .format(t=symbol), publisher="Synthetic Wire",
                         summary="Synthetic news item generated for demos; not a real event.")
                for d in _days(start, end, 2, "news", symbol)]

    def global_news(self, start: dt.date, end: dt.date, limit: int) -> list[NewsItem]:
        return [NewsItem(published=dt.datetime.combine(d, dt.time(12), dt.timezone.utc),
                         title=_GLOBAL[stable_seed("g", d) % len(_GLOBAL)],
                         publisher="Synthetic Wire", summary="Synthetic macro headline.")
                for d in _days(start, end, 2, "global", "")]

    def macro(self, series_id: str, start: dt.date, end: dt.date,
              as_of: dt.date) -> list[Observation]:
        """A deterministic stand-in around the series' typical level, published with the
        series' usual lag (so a trade date sees last month's CPI, not this month's)."""
        if series_id not in MACRO_SERIES:
            raise NoData(f"no synthetic series {series_id}")
        lag = dt.timedelta(days=_STEPS[MACRO_SERIES[series_id].frequency][1])
        out = [o for o in _macro_series(series_id, dt.date.today())
               if start <= o.date <= end and o.date + lag <= as_of]
        if not out:
            raise NoData(f"no synthetic {series_id} observations published by {as_of}")
        return out

    def predictions(self, query: str, trade_date: dt.date, limit: int) -> list[Prediction]:
        out = []
        for i, question in enumerate(_QUESTIONS[:limit]):
            created = dt.datetime.combine(trade_date - dt.timedelta(days=20 + 10 * i),
                                          dt.time(12), dt.timezone.utc)
            yes = round(0.05 + (stable_seed("pm", query, trade_date, i) % 90) / 100, 2)
            out.append(Prediction(
                question=question.format(q=query), created=created, event="Synthetic markets",
                closes=trade_date + dt.timedelta(days=30), outcomes=("Yes", "No"),
                prices=(yes, round(1 - yes, 2)), volume=float(1000 * (i + 1)),
                priced_at=dt.datetime.combine(trade_date, dt.time(12), dt.timezone.utc)))
        return out

    def social(self, symbol: str, start: dt.date, end: dt.date) -> list[Post]:
        return [Post(created=dt.datetime.combine(d, dt.time(15), dt.timezone.utc),
                     source="synthetic", author=f"synthetic_user_{stable_seed(symbol, d) % 97}",
                     text=f"Synthetic post: feeling {_MOODS[stable_seed('m', symbol, d) % 3]} "
                          f"about {symbol}", sentiment=_MOODS[stable_seed('m', symbol, d) % 3])
                for d in _days(start, end, 2, "social", symbol)]
