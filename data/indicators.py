"""Technical indicators by the names the market analyst knows, computed with pandas-ta.

A table (name -> description, computation) rather than an if-ladder, so the list offered to
the model, the validation message and the computation can never disagree. ``talib=False``
everywhere: results must not change with whether TA-Lib happens to be installed."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Indicator:
    description: str
    compute: Callable[["pd.DataFrame"], "pd.Series | pd.DataFrame | None"]
    column: str | None = None  # the column (prefix) it takes from a frame others share


def _ta():
    import pandas_ta as ta
    return ta


def _col(frame: "pd.DataFrame | None", prefix: str) -> "pd.Series | None":
    if frame is None:  # pandas-ta answers None when the series is shorter than the window
        return None
    return frame[[c for c in frame.columns if c.startswith(prefix)][0]]


def _macd(df: "pd.DataFrame") -> "pd.DataFrame | None":
    """MACD line, signal and histogram in one frame: three indicators, one computation."""
    return _ta().macd(df["close"], 12, 26, 9, talib=False)


def _boll(df: "pd.DataFrame") -> "pd.DataFrame | None":
    """Bollinger middle, upper and lower bands in one frame."""
    return _ta().bbands(df["close"], length=20, lower_std=2.0, upper_std=2.0, ddof=0,
                        talib=False)


INDICATORS: dict[str, Indicator] = {
    "close_50_sma": Indicator("50-day simple moving average of close: medium-term trend.",
                              lambda df: _ta().sma(df["close"], 50, talib=False)),
    "close_200_sma": Indicator("200-day simple moving average of close: long-term trend.",
                               lambda df: _ta().sma(df["close"], 200, talib=False)),
    "close_10_ema": Indicator("10-day exponential moving average of close: short-term momentum.",
                              lambda df: _ta().ema(df["close"], 10, talib=False)),
    "macd": Indicator("MACD line: EMA(12) - EMA(26) of close.", _macd, "MACD_"),
    "macds": Indicator("MACD signal: EMA(9) of the MACD line.", _macd, "MACDs_"),
    "macdh": Indicator("MACD histogram: MACD line - signal.", _macd, "MACDh_"),
    "rsi": Indicator("RSI(14), Wilder smoothing: >70 overbought, <30 oversold.",
                     lambda df: _ta().rsi(df["close"], 14, talib=False)),
    "boll": Indicator("Bollinger middle band: 20-day SMA of close.", _boll, "BBM_"),
    "boll_ub": Indicator("Bollinger upper band: middle + 2 population std (20 days).",
                         _boll, "BBU_"),
    "boll_lb": Indicator("Bollinger lower band: middle - 2 population std (20 days).",
                         _boll, "BBL_"),
    "atr": Indicator("ATR(14), Wilder smoothing of true range: volatility in price units.",
                     lambda df: _ta().atr(df["high"], df["low"], df["close"], 14, talib=False)),
    "vwma": Indicator("20-day volume-weighted moving average of close.",
                      lambda df: _ta().vwma(df["close"], df["volume"], 20)),
    "mfi": Indicator("Money Flow Index(14): volume-weighted RSI of typical price.",
                     lambda df: _ta().mfi(df["high"], df["low"], df["close"], df["volume"], 14,
                                          talib=False)),
}


class UnknownIndicator(ValueError):
    """An indicator name outside the table; the message lists the valid ones."""


def compute(name: str, bars: "pd.DataFrame") -> "pd.Series":
    """The named indicator over ``bars`` (normalised frame); NaN where the window is short."""
    return compute_many([name], bars)[(name or "").strip().lower()]


def compute_many(names: "Iterable[str]", bars: "pd.DataFrame") -> "dict[str, pd.Series]":
    """Several indicators over the same bars; those that share a computation (the three MACD
    series, the three Bollinger bands) share one call of it."""
    import pandas as pd
    keys = [(name or "").strip().lower() for name in names]
    unknown = [k for k in keys if k not in INDICATORS]
    if unknown:
        raise UnknownIndicator(f"unknown indicator {unknown[0]!r}; valid indicators: "
                               + ", ".join(INDICATORS))
    shared: dict[int, Any] = {}
    out: dict[str, pd.Series] = {}
    for key in keys:
        spec = INDICATORS[key]
        if bars.empty:
            out[key] = pd.Series(dtype=float, index=bars.index)
            continue
        fn_id = id(spec.compute)
        if fn_id not in shared:
            shared[fn_id] = spec.compute(bars)
        raw = shared[fn_id]
        series = _col(raw, spec.column) if spec.column else raw
        if series is None:  # pandas-ta answers None when the series is shorter than the window
            out[key] = pd.Series(float("nan"), index=bars.index)
        else:
            out[key] = series.astype(float).reindex(bars.index)
    return out
