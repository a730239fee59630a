"""Local files, synthetic data, the router and the look-ahead guards, on real OHLCV files."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from data.model import NoData, RateLimited
from data.router import DataError, route
from data.service import MarketData
from data.tools import NO_DATA, TOOL_SPECS
from data.vendors.local import LocalVendor
from data.vendors.synthetic import SyntheticVendor
from events.config import DEFAULT_VENDORS

D = dt.date(2024, 5, 10)


def only(*chain: str) -> dict:
    return {k: chain for k in DEFAULT_VENDORS}


def test_local_reads_both_column_orders(shared_data):
    a = LocalVendor(shared_data / "ohlcv").prices("NVDA", dt.date(2024, 5, 1), D)
    b = LocalVendor(shared_data / "ohlcv_2021_2026").prices("NVDA", dt.date(2024, 5, 1), D)
    assert list(a.columns) == ["open", "high", "low", "close", "volume"]
    assert len(a) == len(b) == 8
    # same market, two sources: closes agree; open is not confused with close
    assert a["close"].to_numpy() == pytest.approx(b["close"].to_numpy(), rel=0.005)
    assert a["open"].to_numpy() == pytest.approx(b["open"].to_numpy(), rel=0.005)
    assert (a["open"] != a["close"]).all()
    assert a.loc["2024-05-10", "close"] == pytest.approx(89.84, abs=0.01)


def test_local_missing_file_is_no_data_and_next_vendor_answers(ohlcv_dir):
    with pytest.raises(NoData):
        LocalVendor(ohlcv_dir).prices("ZZZZ", D, D)
    md = MarketData(vendors=only("local", "synthetic"), data_dir=str(ohlcv_dir))
    res = md.call_tool("get_stock_data", {"symbol": "ZZZZ", "start_date": "2024-05-01",
                                          "end_date": "2024-05-10"}, D)
    assert res.status == "ok" and res.vendor == "synthetic"
    assert md.call_tool("get_stock_data", {"symbol": "NVDA", "start_date": "2024-05-01",
                                           "end_date": "2024-05-10"}, D).vendor == "local"


def test_local_fixtures_and_every_look_ahead_guard(tmp_path):
    (tmp_path / "ACME.csv").write_text(
        "Date,Open,High,Low,Close,Volume\n2024-05-09,10,11,9,10.5,100\n"
        "2024-05-10,10.5,12,10,11.5,200\n2024-05-13,11.5,13,11,12.5,300\n")
    (tmp_path / "ACME.statements.json").write_text(json.dumps({"income": {"quarterly": [
        {"period_end": "2024-03-31", "filed": "2024-05-20", "values": {"Revenue": 3.0}},
        {"period_end": "2023-12-31", "filed": "2024-02-15", "values": {"Revenue": 2.0}},
        {"period_end": "2024-06-30", "values": {"Revenue": 4.0}}]}}))
    (tmp_path / "ACME.news.json").write_text(json.dumps([
        {"published": "2024-05-10T23:00:00+00:00", "title": "on the day"},
        {"published": "2024-05-11T01:00:00+00:00", "title": "the day after"}]))
    (tmp_path / "ACME.insider.json").write_text(json.dumps([
        {"date": "2024-05-01", "insider": "Early Bird"},
        {"date": "2024-05-11", "insider": "Late Comer"}]))
    (tmp_path / "ACME.social.json").write_text(json.dumps([
        {"created": "2024-05-09T10:00:00Z", "source": "local", "text": "before"},
        {"created": "2024-05-12T10:00:00Z", "source": "local", "text": "after"}]))
    md = MarketData(vendors=only("local"), data_dir=str(tmp_path))
    call = lambda name, **a: md.call_tool(name, {"ticker": "ACME", "symbol": "ACME", **a}, D)
    prices = call("get_stock_data", start_date="2024-05-01", end_date="2024-06-01")
    assert "2024-05-10,10.5" in prices.text and "2024-05-13" not in prices.text
    assert "end_date 2024-06-01 clamped to trade date 2024-05-10" in prices.text
    inc = call("get_income_statement", curr_date="2024-06-30")
    # Q1 ended before D but was filed after it; Q2 ended after it: only Q4 2023 is visible
    assert inc.text.splitlines()[1] == "item | 2023-12-31"
    assert inc.text.splitlines()[2] == "Revenue | 2.0000"
    news = call("get_news", start_date="2024-05-01", end_date="2024-05-12")
    assert "on the day" in news.text and "the day after" not in news.text
    ins = call("get_insider_transactions", curr_date="2024-05-10")
    assert "Early Bird" in ins.text and "Late Comer" not in ins.text
    soc = call("get_social_posts", curr_date="2024-05-10")
    assert "before" in soc.text and ": after" not in soc.text
    snap = md.snapshot("ACME", D)
    assert snap.last_bar.date == D and snap.recent_closes[-1] == (D, 11.5)


def test_nobody_has_data_says_do_not_invent(tmp_path):
    md = MarketData(vendors=only("local"), data_dir=str(tmp_path))
    res = md.call_tool("get_news", {"ticker": "brk.b", "start_date": "2024-05-01",
                                    "end_date": "2024-05-10"}, D)
    assert res.status == "no_data" and res.text.startswith(NO_DATA + ":")
    assert "do not estimate or invent" in res.text
    assert "'brk.b' (tried as 'BRK-B')" in res.text


class Broken:
    name = "broken"

    def __init__(self, exc):
        self.exc = exc

    def prices(self, *a):
        raise self.exc


def test_router_fallback_and_data_error(ohlcv_dir):
    ok = LocalVendor(ohlcv_dir)
    call = lambda fn: fn("NVDA", D, D)
    got = route([Broken(RateLimited("429")), ok], "prices", call, "prices")
    assert got.vendor == "local" and "broken: rate limited (429)" in got.reasons[0]
    with pytest.raises(DataError, match=r"first error: broken: OSError: disk on fire"):
        route([Broken(OSError("disk\non fire")), Broken(ValueError("x"))], "prices", call, "p")
    # one vendor said "no data": that is an answer, so NO_DATA rather than an exception
    nothing = route([Broken(OSError("x")), LocalVendor(ohlcv_dir)], "prices",
                    lambda fn: fn("ZZZZ", D, D), "p")
    assert not nothing.found
    # not configured counts as no answer: skip to the next
    skipped = route([LocalVendor(None), ok], "prices", call, "p")
    assert skipped.vendor == "local" and "not configured" in skipped.reasons[0]


def test_tool_vendors_override_category_chain(ohlcv_dir):
    md = MarketData(vendors=only("local"), tool_vendors={"get_stock_data": ("synthetic",)},
                    data_dir=str(ohlcv_dir))
    a = {"symbol": "NVDA", "start_date": "2024-05-01", "end_date": "2024-05-10"}
    assert md.call_tool("get_stock_data", a, D).vendor == "synthetic"
    assert md.call_tool("get_verified_market_snapshot", {"symbol": "NVDA"}, D).vendor == "local"


def test_bad_calls_are_error_results_not_exceptions(ohlcv_dir):
    md = MarketData(vendors=only("local"), data_dir=str(ohlcv_dir))
    bad = md.call_tool("get_weather", {}, D)
    assert bad.status == "error" and "get_stock_data" in bad.text
    miss = md.call_tool("get_stock_data", {"symbol": "NVDA"}, D)
    assert miss.status == "error" and "start_date" in miss.text
    date = md.call_tool("get_news", {"ticker": "NVDA", "start_date": "May 1",
                                     "end_date": "2024-05-10"}, D)
    assert date.status == "error" and "YYYY-MM-DD" in date.text
    tick = md.call_tool("get_stock_data", {"symbol": "../etc/passwd", "start_date": "2024-05-01",
                                           "end_date": "2024-05-10"}, D)
    assert tick.status == "error" and "not a valid symbol" in tick.text
    assert set(TOOL_SPECS) == {
        "get_stock_data", "get_indicators", "get_verified_market_snapshot", "get_news",
        "get_global_news", "get_fundamentals", "get_balance_sheet", "get_cashflow",
        "get_income_statement", "get_insider_transactions", "get_social_posts",
        "get_macro_indicators", "get_prediction_markets"}
    for spec in TOOL_SPECS.values():
        assert spec.parameters["type"] == "object"
        assert set(spec.parameters["required"]) <= set(spec.parameters["properties"])


def test_one_record_per_tool():
    from data.tools import TOOLS
    from events.config import DEFAULT_VENDORS
    assert {name: tool.spec for name, tool in TOOLS.items()} == TOOL_SPECS
    for name, tool in TOOLS.items():
        assert tool.name == name and callable(tool.handler)
        assert tool.category in DEFAULT_VENDORS, name
    assert TOOLS["get_indicators"].category == "indicators"
    assert TOOLS["get_social_posts"].category == "social"


def test_synthetic_is_deterministic_labelled_and_prefix_stable():
    v = SyntheticVendor()
    a = v.prices("ACME", dt.date(2020, 1, 1), D)
    b = v.prices("ACME", dt.date(2023, 1, 1), dt.date(2023, 12, 29))
    assert a.loc["2023-06-01", "close"] == b.loc["2023-06-01", "close"]
    assert a.index[0].date() == dt.date(2020, 1, 1) or a.index[0].dayofweek < 5
    assert (a["high"] >= a[["open", "close"]].max(axis=1)).all()
    assert (a["low"] <= a[["open", "close"]].min(axis=1)).all()
    assert v.prices("OTHER", D, D)["close"].iloc[0] != a["close"].iloc[-1]
    md = MarketData(vendors=only("synthetic"))
    assert md.identity("ACME").name == "ACME (synthetic)"
    assert md.identity("ACME").sector == "Synthetic"
    for name in ("get_news", "get_fundamentals", "get_income_statement",
                 "get_insider_transactions", "get_social_posts", "get_global_news"):
        res = md.call_tool(name, {"ticker": "ACME", "start_date": "2024-04-01",
                                  "end_date": "2024-05-10", "curr_date": "2024-05-10"}, D)
        assert res.status == "ok" and "synthetic" in res.text.lower(), name


def test_synthetic_is_stable_across_processes():
    import subprocess
    import sys
    code = ("import datetime as d; from data.vendors.synthetic import SyntheticVendor as S; "
            "print(repr(S().prices('ACME', d.date(2024,5,10), d.date(2024,5,10))"
            "['close'].iloc[0]))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={"PYTHONHASHSEED": seed, "PATH": ""}, cwd=".").stdout
            for seed in ("1", "2")}
    assert len(runs) == 1 and runs.pop().strip()
