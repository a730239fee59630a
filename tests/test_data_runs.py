"""Whole runs on real market data through the product's data seams.

Yahoo is the product's yfinance vendor replaying real recorded Yahoo responses
(TA_ACTORS_YAHOO_ARCHIVE, set for the test session in conftest before Ray starts, so the
market-data actor inherits it). Only the far side of the network is replaced; yfinance, our
vendors, router, guards, actors and store all run for real. The social analyst is left out
of the Yahoo runs: its vendors (Reddit, StockTwits) are not Yahoo and would go online."""
from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path

import pytest

from data.service import MarketData
from data.vendors.yahoo_archive import ARCHIVE_ENV
from events.duckdb_store import DuckDBEventStore

NO_SOCIAL = "market,news,fundamentals"
YF = {k: ("yfinance",) for k in ("prices", "indicators", "fundamentals", "news", "identity")}


def run(cli, *args):
    result = cli("run", *args, "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["status"] == "completed", row
    return row


def events_of(store_path: Path, run_id: str):
    with DuckDBEventStore(store_path, read_only=True) as store:
        events = store.read_stream(run_id)
        assert store.verify(run_id).ok
    return events


def first(events, type_):
    return next(e.payload for e in events if e.type == type_)


def tools(events):
    return [e.payload for e in events if e.type == "ToolCallCompleted"]


def recorded(shared_data: Path, name: str) -> dict:
    return json.loads((shared_data / "yahoo" / name).read_text())["body"]


def recorded_close(shared_data: Path, day: str) -> float:
    """AAPL's adjusted close on ``day`` as the recorded Yahoo chart has it."""
    chart = recorded(shared_data, "chart-AAPL-2020-08-31-to-2020-11-07.json")["chart"]["result"][0]
    days = [dt.datetime.fromtimestamp(t, dt.timezone.utc).date().isoformat()
            for t in chart["timestamp"]]
    return chart["indicators"]["adjclose"][0]["adjclose"][days.index(day)]


def search_titles(shared_data: Path) -> list[str]:
    return [n["title"] for n in recorded(shared_data, "search-AAPL.json")["news"]]


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to resolve or connect from this process fails the test."""
    attempts: list = []

    def refuse(*args, **kwargs):
        attempts.append(args[1:] if args else kwargs)
        raise AssertionError(f"network access attempted: {args[1:]}")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    # yfinance's own default transport is curl_cffi (libcurl, not Python sockets)
    curl = pytest.importorskip("curl_cffi.requests")
    monkeypatch.setattr(curl.Session, "request", refuse)
    return attempts


@pytest.fixture
def fresh_yfinance(tmp_path):
    import yfinance as yf
    from yfinance.data import YfData
    yf.set_tz_cache_location(str(tmp_path / "yf-tz"))
    YfData.cache_get.cache_clear()
    yield
    YfData.cache_get.cache_clear()


def test_archive_env_replays_yahoo_without_network(monkeypatch, shared_data, no_network,
                                                   fresh_yfinance, tmp_path):
    monkeypatch.setenv(ARCHIVE_ENV, str(shared_data / "yahoo"))
    cache = tmp_path / "cache.duckdb"
    md = MarketData(vendors=YF, cache_path=str(cache))  # no session: the env var decides
    inst = md.identity("AAPL")
    assert (inst.name, inst.sector, inst.vendor) == ("Apple Inc.", "Technology", "yfinance")
    snap = md.snapshot("AAPL", dt.date(2020, 11, 6))
    assert snap.vendor == "yfinance" and str(snap.last_bar.date) == "2020-11-06"
    assert snap.last_bar.close == pytest.approx(recorded_close(shared_data, "2020-11-06"))
    news = md.call_tool("get_news", {"ticker": "AAPL", "start_date": "2025-02-20",
                                     "end_date": "2025-02-25"}, dt.date(2025, 2, 25))
    assert news.status == "ok" and all(t in news.text for t in search_titles(shared_data))
    missing = md.identity("ZZZZ")  # not recorded: a clear "no data", not an error
    assert not missing.available and "404" in missing.note
    replay = md._vendor("yfinance").replay
    assert replay is not None and no_network == []
    statuses = {status for _, status in replay.calls}
    assert statuses <= {200, 404} and 200 in statuses
    assert any("/v10/finance/quoteSummary/ZZZZ" in url and status == 404
               for url, status in replay.calls)
    # replayed answers stay out of the download cache (it holds real downloads only)
    import duckdb
    with duckdb.connect(str(cache), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM entries").fetchone()[0] == 0


def test_run_on_yfinance_vendor_replays_recorded_yahoo(cli, shared_data, store_path):
    row = run(cli, "AAPL", "--date", "2020-11-06", "--vendor", "yfinance",
              "--analysts", NO_SOCIAL, "--store", store_path)
    events = events_of(store_path, row["run_id"])
    config = first(events, "RunRequested").config
    assert config.vendors["prices"] == ("yfinance",) and config.vendors["news"] == ("yfinance",)
    inst = first(events, "InstrumentResolved").instrument
    assert (inst.name, inst.sector, inst.industry, inst.vendor) == (
        "Apple Inc.", "Technology", "Consumer Electronics", "yfinance")
    snap = first(events, "MarketSnapshotTaken").snapshot
    assert snap.vendor == "yfinance" and str(snap.last_bar.date) == "2020-11-06"
    assert snap.last_bar.close == pytest.approx(recorded_close(shared_data, "2020-11-06"))
    calls = tools(events)
    ok = [t for t in calls if t.result.status == "ok"]
    assert {t.tool for t in ok} >= {"get_stock_data", "get_indicators"}
    assert {t.result.vendor for t in ok} == {"yfinance"}
    assert all(t.result.status != "error" for t in calls), [t.result.text for t in calls]
    # the recorded search holds news from Feb 2025: asked for, and never shown to a 2020 run
    news = [t for t in calls if t.tool == "get_news"]
    assert news and all(t.result.status == "no_data" for t in news)
    everything = "\n".join(e.payload.model_dump_json() for e in events)
    assert not any(title in everything for title in search_titles(shared_data))


def test_vendor_chain_falls_back_to_local_files(cli, shared_data, ohlcv_dir, store_path):
    """Yahoo's recorded chart ends in 2020, so on 2025-02-25 prices fall through to the local
    files, while identity, news and statements still come from Yahoo."""
    row = run(cli, "AAPL", "--date", "2025-02-25", "--vendor", "yfinance",
              "--vendors", "prices=yfinance,local; indicators=yfinance,local",
              "--data-dir", ohlcv_dir, "--analysts", NO_SOCIAL, "--store", store_path)
    events = events_of(store_path, row["run_id"])
    config = first(events, "RunRequested").config
    assert config.vendors["prices"] == ("yfinance", "local")
    assert config.vendors["news"] == ("yfinance",)
    assert first(events, "InstrumentResolved").instrument.name == "Apple Inc."
    snap = first(events, "MarketSnapshotTaken").snapshot
    assert snap.vendor == "local" and str(snap.last_bar.date) == "2025-02-25"
    csv_row = next(line for line in (ohlcv_dir / "AAPL.csv").read_text().splitlines()
                   if line.startswith("2025-02-25"))
    assert snap.last_bar.close == pytest.approx(float(csv_row.split(",")[4]))
    by_tool: dict[str, set] = {}
    for t in tools(events):
        by_tool.setdefault(t.tool, set()).add((t.result.status, t.result.vendor))
    assert by_tool["get_stock_data"] == {("ok", "local")}
    assert by_tool["get_indicators"] == {("ok", "local")}
    assert ("ok", "yfinance") in by_tool["get_news"]
    assert ("ok", "yfinance") in by_tool["get_income_statement"] | by_tool.get(
        "get_balance_sheet", set())
    news_text = next(t.result.text for t in tools(events) if t.tool == "get_news")
    assert all(title in news_text for title in search_titles(shared_data))
    report = next(e.payload.report for e in events if e.type == "AnalystReportSubmitted"
                  and e.payload.analyst == "news")
    assert search_titles(shared_data)[0] in report


@pytest.mark.parametrize("spec, data_dir, message", [
    ("weather=local", True, "unknown data category 'weather'"),
    ("prices=yahoo", False, "unknown vendor 'yahoo'"),
    ("social=yfinance", False, "vendor 'yfinance' cannot serve social"),
    ("prices=yfinance,local", False, "needs --data-dir"),
    ("prices", False, "is not CATEGORY=VENDOR"),
    ("prices=local;prices=yfinance", True, "given twice"),
])
def test_vendors_option_rejects_bad_chains(cli, ohlcv_dir, store_path, spec, data_dir, message):
    extra = ["--data-dir", str(ohlcv_dir)] if data_dir else []
    result = cli("run", "AAPL", "--date", "2024-05-10", "--offline", "--vendors", spec,
                 *extra, "--store", store_path)
    assert result.exit_code != 0
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not store_path.exists()  # refused before anything was written
