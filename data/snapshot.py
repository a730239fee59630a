"""The verified market snapshot: exact numbers fixed before the analysts start.

Deterministic by construction: the same bars give the same snapshot, and the indicator
window is a fixed span before the trade date (not "whatever history the vendor had"), so two
vendors with the same bars agree to the last digit."""
from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from events.records import Bar, MarketSnapshot

from .indicators import compute_many
from .model import NoData

if TYPE_CHECKING:
    import pandas as pd

SNAPSHOT_INDICATORS = ("close_10_ema", "close_50_sma", "close_200_sma", "rsi", "boll",
                       "boll_ub", "boll_lb", "macd", "macds", "macdh", "atr")
#: Calendar days of history before the trade date used for every indicator (SMA-200 needs
#: ~290 calendar days; the rest lets EMA/Wilder smoothing converge far below 1e-9).
HISTORY_DAYS = 800


#: Default freshness: the last bar at most this many trading days before the trade date.
MAX_STALE_DAYS = 5


class StalePrices(NoData):
    """The newest bar on or before the trade date is too old for a verified snapshot (a
    delisted or halted symbol, a folder of files that stops early): no snapshot is better
    than a year-old close presented as today's."""


def trading_days_after(last: dt.date, day: dt.date) -> int:
    """Weekdays after ``last`` up to and including ``day`` (exchange holidays count: the
    measure errs towards calling a series fresh by a day or two, never stale wrongly)."""
    import numpy as np
    return int(np.busday_count(last + dt.timedelta(days=1), day + dt.timedelta(days=1)))


def check_fresh(symbol: str, vendor: str, last: dt.date, trade_date: dt.date,
                max_stale_days: int) -> None:
    """StalePrices, with a note a reader can act on, when ``last`` is too old."""
    gap = trading_days_after(last, trade_date)
    if gap > max_stale_days:
        raise StalePrices(
            f"stale prices for {symbol}: the last bar ({last}, via {vendor}) is {gap} trading "
            f"days before {trade_date}; a verified snapshot needs one within {max_stale_days} "
            "(--max-stale-days / TA_ACTORS_MAX_STALE_DAYS), so there is none")


def history_start(trade_date: dt.date, look_back_days: int = 0) -> dt.date:
    return trade_date - dt.timedelta(days=HISTORY_DAYS + max(0, look_back_days))


def _num(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) \
        else round(float(value), 6)


def build(symbol: str, trade_date: dt.date, bars: "pd.DataFrame", vendor: str,
          n_closes: int = 30,
          compute_fn: Callable[[Iterable[str], "pd.DataFrame"], dict] = compute_many, *,
          max_stale_days: int = MAX_STALE_DAYS) -> MarketSnapshot | None:
    """Snapshot from normalised bars; None when there is no bar on or before the date,
    StalePrices when the last one is more than ``max_stale_days`` trading days before it.
    ``compute_fn`` computes several indicators at once (and may answer from a memo)."""
    import pandas as pd
    bars = bars[bars.index <= pd.Timestamp(trade_date)]
    if bars.empty:
        return None
    last = bars.iloc[-1]
    day = bars.index[-1].date()
    check_fresh(symbol, vendor, day, trade_date, max_stale_days)
    series = compute_fn(SNAPSHOT_INDICATORS, bars)
    indicators = {name: _num(series[name].iloc[-1]) for name in SNAPSHOT_INDICATORS}
    tail = bars["close"].iloc[-n_closes:]
    return MarketSnapshot(
        symbol=symbol, trade_date=trade_date,
        last_bar=Bar(date=day, open=round(float(last["open"]), 6),
                     high=round(float(last["high"]), 6), low=round(float(last["low"]), 6),
                     close=round(float(last["close"]), 6), volume=float(last["volume"])),
        indicators=indicators,
        recent_closes=[(ts.date(), round(float(c), 6)) for ts, c in tail.items()],
        vendor=vendor)
