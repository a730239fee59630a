"""Stale prices: a series whose last bar lies long before the trade date gives no verified
snapshot, and says why (issue 12). On real OHLCV files, whole and truncated."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from cli.options import build_configs
from data.service import MarketData
from data.snapshot import StalePrices, trading_days_after
from events.config import InvalidInput
from events.duckdb_store import DuckDBEventStore

LOCAL = {"prices": ("local",), "indicators": ("local",)}
LAST_BAR = dt.date(2025, 10, 8)  # NVDA.csv's last row (a Wednesday)


def test_trading_days_count_weekdays_after_the_last_bar():
    assert trading_days_after(LAST_BAR, LAST_BAR) == 0
    assert trading_days_after(LAST_BAR, dt.date(2025, 10, 11)) == 2  # Thu, Fri; Sat is none
    assert trading_days_after(LAST_BAR, dt.date(2025, 10, 15)) == 5
    assert trading_days_after(dt.date(2025, 10, 10), dt.date(2025, 10, 13)) == 1  # Fri -> Mon


def test_a_year_after_the_last_bar_gives_no_snapshot_and_a_note(ohlcv_dir):
    md = MarketData(vendors=LOCAL, data_dir=str(ohlcv_dir))
    assert md.snapshot("NVDA", dt.date(2025, 10, 15)).last_bar.date == LAST_BAR  # 5: fresh
    with pytest.raises(StalePrices) as stale:
        md.snapshot("NVDA", dt.date(2025, 10, 16))  # 6 trading days
    assert "the last bar (2025-10-08, via local) is 6 trading days before 2025-10-16" \
        in str(stale.value)
    with pytest.raises(StalePrices, match="is 261 trading days before 2026-10-08"):
        md.snapshot("NVDA", dt.date(2026, 10, 8))
    # the limit is the service's setting: a wider one accepts the same bars
    lenient = MarketData(vendors=LOCAL, data_dir=str(ohlcv_dir), max_stale_days=300)
    assert lenient.snapshot("NVDA", dt.date(2026, 10, 8)).last_bar.date == LAST_BAR
    # the analysts' snapshot tool says the same instead of quoting a year-old close
    res = md.call_tool("get_verified_market_snapshot", {"symbol": "NVDA"}, dt.date(2026, 10, 8))
    assert res.status == "no_data" and "stale prices for NVDA" in res.text
    assert "189.11" not in res.text


def test_a_truncated_series_is_stale(ohlcv_dir, tmp_path):
    rows = (ohlcv_dir / "NVDA.csv").read_text().splitlines()
    kept = [rows[0]] + [r for r in rows[1:] if r[:10] <= "2024-03-28"]
    (tmp_path / "NVDA.csv").write_text("\n".join(kept) + "\n")
    md = MarketData(vendors=LOCAL, data_dir=str(tmp_path))
    with pytest.raises(StalePrices, match=r"last bar \(2024-03-28, via local\) is 30 trading"):
        md.snapshot("NVDA", dt.date(2024, 5, 9))
    fresh = md.snapshot("NVDA", dt.date(2024, 4, 4))  # Good Friday counts: 5 weekdays
    whole = MarketData(vendors=LOCAL, data_dir=str(ohlcv_dir)).snapshot("NVDA",
                                                                        dt.date(2024, 3, 28))
    assert fresh.last_bar == whole.last_bar and fresh.indicators == whole.indicators


def test_the_limit_comes_from_the_flag_else_the_variable(monkeypatch):
    args = (["NVDA"], "2024-05-10", "market", 1, 1, True, None, None, None, None, None)
    assert build_configs(*args)[0].max_stale_days == 5
    monkeypatch.setenv("TA_ACTORS_MAX_STALE_DAYS", "20")
    assert build_configs(*args)[0].max_stale_days == 20
    assert build_configs(*args, max_stale_days=0)[0].max_stale_days == 0
    with pytest.raises(InvalidInput, match=r"max_stale_days \(--max-stale-days\)"):
        build_configs(*args, max_stale_days=-1)
    monkeypatch.setenv("TA_ACTORS_MAX_STALE_DAYS", "soon")
    with pytest.raises(InvalidInput, match="TA_ACTORS_MAX_STALE_DAYS='soon' is not a whole"):
        build_configs(*args)


def test_a_run_on_stale_prices_completes_without_a_snapshot(cli, ohlcv_dir, store_path):
    """The decision: the run proceeds (the analysts still see dated bars and say so), but
    nothing is presented as a verified current price; the offline rule rates it Hold."""
    result = cli("run", "NVDA", "--date", "2026-10-08", "--data-dir", str(ohlcv_dir),
                 "--analysts", "market", "--store", str(store_path), "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["status"] == "completed" and row["rating"] == "Hold"
    with DuckDBEventStore(store_path, read_only=True) as store:
        events = {e.type: e.payload for e in store.read_stream(row["run_id"])}
    assert events["RunRequested"].config.max_stale_days == 5  # the limit is recorded
    taken = events["MarketSnapshotTaken"]
    assert taken.snapshot is None
    assert taken.note.startswith("stale prices for NVDA: the last bar (2025-10-08, via local)")
    assert "\n" not in taken.note


def test_a_stale_vendor_hands_the_snapshot_to_the_next_fresh_one(ohlcv_dir, tmp_path):
    """In a fallback chain a stale first vendor is passed over like one without data: the
    snapshot comes from the next vendor with fresh bars, and its indicators are that vendor's
    (kept apart from the stale vendor's, which the market analyst's tools still read)."""
    rows = (ohlcv_dir / "NVDA.csv").read_text().splitlines()
    (tmp_path / "NVDA.csv").write_text("\n".join(
        [rows[0]] + [r for r in rows[1:] if r[:10] <= "2024-03-28"]) + "\n")
    chain = {"prices": ("local", "synthetic"), "indicators": ("local", "synthetic")}
    md = MarketData(vendors=chain, data_dir=str(tmp_path))
    day = dt.date(2024, 5, 9)
    got = md.snapshot("NVDA", day)
    assert got.vendor == "synthetic" and got.last_bar.date == day
    alone = MarketData(vendors={"prices": ("synthetic",), "indicators": ("synthetic",)})
    assert got.indicators == alone.snapshot("NVDA", day).indicators
    # the tools keep answering from the first vendor with data, with its own indicators
    tool = md.call_tool("get_indicators", {"symbol": "NVDA", "indicator": "rsi",
                                           "curr_date": str(day)}, day)
    assert "(vendor local)" in tool.text
    own = MarketData(vendors=LOCAL, data_dir=str(tmp_path)).call_tool(
        "get_indicators", {"symbol": "NVDA", "indicator": "rsi", "curr_date": str(day)}, day)
    assert tool.text == own.text
    # every vendor stale: no snapshot, and the note names the first one
    both = MarketData(vendors={"prices": ("local", "local"), "indicators": ("local",)},
                      data_dir=str(tmp_path))
    with pytest.raises(StalePrices, match=r"last bar \(2024-03-28, via local\)"):
        both.snapshot("NVDA", day)
