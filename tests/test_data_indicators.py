"""Indicators and the verified snapshot against independent formulas on real NVDA bars."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from data.frames import normalize_bars
from data.indicators import INDICATORS, UnknownIndicator, compute
from data.service import MarketData
from data.snapshot import SNAPSHOT_INDICATORS, history_start

D = dt.date(2024, 5, 10)
LOCAL = {k: ("local",) for k in ("prices", "indicators")}


@pytest.fixture(scope="module")
def nvda(ohlcv_dir) -> pd.DataFrame:
    return pd.read_csv(ohlcv_dir / "NVDA.csv", index_col="Date", parse_dates=True)


def independent(df: pd.DataFrame) -> dict[str, pd.Series]:
    c, h, l, v = df["Close"], df["High"], df["Low"], df["Volume"]
    ema = lambda s, n: s.ewm(span=n, adjust=False).mean()
    wilder = lambda s: s.ewm(alpha=1 / 14, adjust=False).mean()
    macd = ema(c, 12) - ema(c, 26)
    sig = ema(macd, 9)
    d = c.diff()
    rsi = 100 - 100 / (1 + wilder(d.clip(lower=0)) / wilder(-d.clip(upper=0)))
    mid, sd = c.rolling(20).mean(), c.rolling(20).std(ddof=0)
    tr = pd.concat([h - l, (h - c.shift()).abs(), (l - c.shift()).abs()], axis=1).max(axis=1)
    tp = (h + l + c) / 3
    flow = tp * v
    pos = flow.where(tp.diff() > 0, 0.0).rolling(14).sum()
    neg = flow.where(tp.diff() < 0, 0.0).rolling(14).sum()
    return {
        "close_50_sma": c.rolling(50).mean(), "close_200_sma": c.rolling(200).mean(),
        "close_10_ema": ema(c, 10), "macd": macd, "macds": sig, "macdh": macd - sig,
        "rsi": rsi, "boll": mid, "boll_ub": mid + 2 * sd, "boll_lb": mid - 2 * sd,
        "atr": wilder(tr), "vwma": (c * v).rolling(20).sum() / v.rolling(20).sum(),
        "mfi": 100 - 100 / (1 + pos / neg),
    }


def test_every_indicator_matches_independent_formula(nvda):
    # ours on the fixed pre-trade-date window; the reference on 20 years of history:
    # agreement also shows the window is long enough for smoothing to converge
    window = normalize_bars(nvda.loc[str(history_start(D)):str(D)].reset_index())
    ref = independent(nvda)
    assert set(ref) == set(INDICATORS)
    for name in INDICATORS:
        ours = compute(name, window)
        for day in ("2024-05-10", "2024-04-01", "2024-02-15"):
            assert ours.loc[day] == pytest.approx(ref[name].loc[day], rel=1e-6, abs=1e-9), \
                (name, day)


def test_known_values_on_the_trade_date(nvda):
    window = normalize_bars(nvda.loc[:str(D)].reset_index())
    assert compute("close_50_sma", window).iloc[-1] == pytest.approx(
        nvda["Close"].loc[:str(D)].iloc[-50:].mean())
    rsi = compute("rsi", window)
    assert rsi.iloc[-1000:].min() > 0 and rsi.max() < 100
    assert np.isnan(compute("close_200_sma", window.iloc[:150]).iloc[-1])


def test_unknown_indicator_lists_valid_ones(ohlcv_dir):
    with pytest.raises(UnknownIndicator, match="close_50_sma, close_200_sma"):
        compute("supertrend", pd.DataFrame())
    md = MarketData(vendors=LOCAL, data_dir=str(ohlcv_dir))
    res = md.call_tool("get_indicators", {"symbol": "NVDA", "indicator": "stoch",
                                          "curr_date": "2024-05-10"}, D)
    assert res.status == "error" and "mfi" in res.text and "vwma" in res.text


def test_get_indicators_tool_window_and_values(ohlcv_dir, nvda):
    md = MarketData(vendors=LOCAL, data_dir=str(ohlcv_dir))
    res = md.call_tool("get_indicators", {"symbol": "NVDA", "indicator": "RSI",
                                          "curr_date": "2024-05-20", "look_back_days": 7}, D)
    lines = [ln for ln in res.text.splitlines() if ln[:4] == "2024"]
    assert [ln[:10] for ln in lines] == ["2024-05-03", "2024-05-06", "2024-05-07",
                                         "2024-05-08", "2024-05-09", "2024-05-10"]
    ref = independent(nvda)["rsi"].loc["2024-05-10"]
    assert lines[-1] == f"2024-05-10: {ref:,.4f}"


def test_snapshot_is_last_bar_on_or_before_and_deterministic(ohlcv_dir, nvda):
    md = MarketData(vendors=LOCAL, data_dir=str(ohlcv_dir))
    saturday = dt.date(2024, 5, 11)
    snap = md.snapshot("NVDA", saturday)
    assert snap.trade_date == saturday and snap.last_bar.date == D
    assert snap.last_bar.close == pytest.approx(nvda.loc["2024-05-10", "Close"])
    assert list(snap.indicators) == list(SNAPSHOT_INDICATORS)
    ref = independent(nvda)
    for name, value in snap.indicators.items():
        assert value == pytest.approx(ref[name].loc["2024-05-10"], rel=1e-6), name
    assert len(snap.recent_closes) == 30 and snap.recent_closes[-1][0] == D
    assert snap.recent_closes[0][0] == dt.date(2024, 4, 1)  # 2024-03-29 was Good Friday
    assert md.snapshot("NVDA", saturday) == snap
    # same bars from the other file layout: same snapshot to 4 decimals
    other = MarketData(vendors=LOCAL, data_dir=str(ohlcv_dir.parent / "ohlcv_2021_2026"))
    snap2 = other.snapshot("NVDA", saturday)
    assert snap2.last_bar.date == D
    assert snap2.indicators["close_50_sma"] == pytest.approx(
        snap.indicators["close_50_sma"], rel=5e-3)
    text = md.call_tool("get_verified_market_snapshot", {"symbol": "NVDA",
                                                         "curr_date": "2024-05-11"}, saturday)
    assert text.status == "ok" and text.text == snap.render()
    assert md.snapshot("NVDA", dt.date(2005, 1, 3)) is None


def test_indicators_computed_together_equal_each_computed_alone(nvda):
    """compute_many shares one MACD and one Bollinger computation between their series; the
    values must be exactly those of computing each indicator alone."""
    from data.indicators import compute_many
    window = normalize_bars(nvda.loc[str(history_start(D)):str(D)].reset_index())
    together = compute_many(list(INDICATORS), window)
    for name in INDICATORS:
        pd.testing.assert_series_equal(together[name], compute(name, window), check_names=False)
