"""yfinance vendor at the network boundary: a requests.Session whose transport adapter (the
product's Yahoo archive, data/vendors/yahoo_archive.py) serves real recorded Yahoo bodies
(../shared/data/yahoo), so yfinance's own parsing and ours run on real responses. Only the
far side of the network is fake."""
from __future__ import annotations

import datetime as dt
import json
import shutil

import pandas as pd
import pytest
import requests
from requests.adapters import BaseAdapter

from data.service import DataError, MarketData
from data.vendors.yahoo_archive import ArchiveAdapter, archive_session
from data.vendors.yfinance_vendor import YFinanceVendor

YF = {k: ("yfinance",) for k in ("prices", "indicators", "fundamentals", "news", "identity")}
TODAY = dt.date.today()


class Throttled(ArchiveAdapter):
    """Yahoo answering every request with HTTP 429."""

    def answer(self, url):
        return 429, b"Too Many Requests", {"Content-Type": "text/plain"}


class Unreachable(BaseAdapter):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def send(self, request, **kwargs):
        self.calls += 1
        raise requests.ConnectionError(f"offline: {request.url[:60]}")

    def close(self):
        """Nothing to release."""


def _session(adapter: BaseAdapter) -> requests.Session:
    return archive_session(adapter)


def _forget_yfinance_memory():
    """yfinance memoises GETs in-process; forget them so only our cache can answer."""
    from yfinance.data import YfData
    YfData.cache_get.cache_clear()


@pytest.fixture(autouse=True)
def _yf_state(tmp_path):
    import yfinance as yf
    yf.set_tz_cache_location(str(tmp_path / "yf-tz"))
    _forget_yfinance_memory()
    yield
    _forget_yfinance_memory()


@pytest.fixture
def yahoo(shared_data):
    adapter = ArchiveAdapter(shared_data / "yahoo")
    return adapter, _session(adapter)


def test_identity_from_quote_summary(yahoo):
    adapter, session = yahoo
    inst = MarketData(vendors=YF, session=session).identity("aapl")
    assert (inst.name, inst.sector, inst.industry) == ("Apple Inc.", "Technology",
                                                        "Consumer Electronics")
    assert inst.currency == "USD" and inst.vendor == "yfinance" and inst.available
    assert any("/quoteSummary/AAPL" in u and status == 200 for u, status in adapter.calls)


def test_unrecorded_ticker_degrades_to_no_data(yahoo):
    _, session = yahoo
    md = MarketData(vendors=YF, session=session)
    inst = md.identity("ZZZZ")
    assert not inst.available and "ZZZZ" in inst.note
    res = md.call_tool("get_insider_transactions", {"ticker": "ZZZZ", "curr_date": "2025-02-20"},
                       dt.date(2025, 2, 20))
    assert res.status == "no_data" and res.text.startswith("NO_DATA_AVAILABLE")


def test_news_from_search_is_filtered_to_trade_date(yahoo):
    _, session = yahoo
    md = MarketData(vendors=YF, session=session)
    # recorded items were published 2025-02-25 (00:20 .. 09:52 UTC)
    ok = md.call_tool("get_news", {"ticker": "AAPL", "start_date": "2025-02-20",
                                   "end_date": "2025-02-25"}, dt.date(2025, 2, 25))
    assert ok.status == "ok" and ok.vendor == "yfinance"
    assert "Why Trump could 'move fast' on Apple's $500B US investment plan" in ok.text
    assert ok.text.count("\n- ") == 4
    early = md.call_tool("get_news", {"ticker": "AAPL", "start_date": "2025-02-20",
                                      "end_date": "2025-03-01"}, dt.date(2025, 2, 24))
    assert early.status == "no_data"  # every item is after the trade date


def test_income_statement_from_fundamentals_timeseries(yahoo):
    _, session = yahoo
    md = MarketData(vendors=YF, session=session)
    q = md.statement("AAPL", "income", "quarterly", dt.date(2025, 1, 1))
    assert q.vendor == "yfinance"
    latest = q.value[0]
    assert latest.period_end == dt.date(2024, 12, 31)
    assert latest.values["Total Revenue"] == pytest.approx(124_300_000_000)
    res = md.call_tool("get_income_statement", {"ticker": "AAPL", "freq": "annual",
                                                "curr_date": "2024-09-29"}, dt.date(2024, 9, 29))
    assert res.status == "ok" and "2023-09-30" in res.text and "2024-09-30" not in res.text
    bs = md.call_tool("get_balance_sheet", {"ticker": "AAPL", "curr_date": "2025-01-01"},
                      dt.date(2025, 1, 1))
    assert bs.status == "ok" and "Total Assets" in bs.text


def test_insider_transactions_drop_after_trade_date(yahoo):
    _, session = yahoo
    md = MarketData(vendors=YF, session=session)
    rows = md.insider("AAPL", dt.date(2025, 2, 1)).value
    assert rows and max(r.date for r in rows) <= dt.date(2025, 2, 1)
    assert any(r.insider == "GORSKY ALEX" for r in rows)
    later = md.insider("AAPL", dt.date(2025, 2, 10)).value
    assert any(r.date == dt.date(2025, 2, 3) and r.insider == "LEVINSON ARTHUR D"
               for r in later)


def test_key_stats_are_live_so_only_for_today(yahoo):
    _, session = yahoo
    md = MarketData(vendors=YF, session=session)
    now = md.call_tool("get_fundamentals", {"ticker": "AAPL", "curr_date": str(TODAY)}, TODAY)
    assert now.status == "ok" and "trailingPE: 38.7639" in now.text
    past = md.call_tool("get_fundamentals", {"ticker": "AAPL", "curr_date": "2024-05-10"},
                        dt.date(2024, 5, 10))
    assert past.status == "no_data" and "after trade date" in past.text


def test_chart_with_split_matches_real_adjusted_csv(yahoo, ohlcv_dir):
    _, session = yahoo
    bars = YFinanceVendor(session=session, retry_delays=()).prices(
        "NVDA", dt.date(2021, 2, 1), dt.date(2022, 1, 28))
    real = pd.read_csv(ohlcv_dir / "NVDA.csv", index_col="Date", parse_dates=True)["Close"]
    # 4:1 split on 2021-07-20: adjusted closes on both sides agree with the adjusted CSV
    for day in ("2021-07-19", "2021-07-20", "2022-01-28"):
        assert bars.loc[day, "close"] == pytest.approx(real.loc[day], rel=0.01)
    jump = bars.loc["2021-07-20", "close"] / bars.loc["2021-07-19", "close"]
    assert 0.9 < jump < 1.1  # no 4x cliff: the split is adjusted


def test_chart_with_dividend_is_dividend_adjusted(yahoo, ohlcv_dir, shared_data):
    _, session = yahoo
    bars = YFinanceVendor(session=session, retry_delays=()).prices(
        "MSFT", dt.date(2021, 2, 1), dt.date(2022, 1, 28))
    body = json.loads((shared_data / "yahoo" / "historical-via-chart-MSFT-dividends-"
                       "2021-02-01-to-2022-01-31.json").read_text())["body"]["chart"]["result"][0]
    raw_first = body["indicators"]["quote"][0]["close"][0]
    assert bars["close"].iloc[0] < raw_first  # earlier closes lowered by later dividends
    real = pd.read_csv(ohlcv_dir / "MSFT.csv", index_col="Date", parse_dates=True)["Close"]
    assert bars.loc["2021-06-01", "close"] == pytest.approx(real.loc["2021-06-01"], rel=0.02)


def test_rate_limit_retries_then_moves_to_next_vendor(shared_data):
    adapter = Throttled(shared_data / "yahoo")
    vendor = YFinanceVendor(session=_session(adapter), retry_delays=(0.0, 0.0))
    from data.model import RateLimited
    with pytest.raises(RateLimited):
        vendor.identity("AAPL")
    md = MarketData(vendors={**YF, "identity": ("yfinance", "synthetic")},
                    session=_session(adapter), retry_delays=(0.0,))
    inst = md.identity("AAPL")
    assert inst.vendor == "synthetic" and inst.name == "AAPL (synthetic)"


def test_offline_after_one_fetch_is_served_from_cache(yahoo, tmp_path):
    _, session = yahoo
    cache = str(tmp_path / "cache.duckdb")
    start, end = dt.date(2021, 6, 1), dt.date(2021, 12, 31)
    online = MarketData(vendors=YF, cache_path=cache, session=session)
    first = online.closes("NVDA", start, end)
    first_news = online.call_tool("get_news", {"ticker": "AAPL", "start_date": "2025-02-20",
                                               "end_date": "2025-02-25"}, dt.date(2025, 2, 25))
    first_id = online.identity("AAPL")
    assert len(first) > 100 and first_news.status == "ok"

    _forget_yfinance_memory()
    dead = Unreachable()
    offline = MarketData(vendors=YF, cache_path=cache, session=_session(dead))
    assert offline.closes("NVDA", start, end) == first
    assert offline.closes("NVDA", dt.date(2021, 7, 1), dt.date(2021, 7, 30)) == \
        [c for c in first if dt.date(2021, 7, 1) <= c[0] <= dt.date(2021, 7, 30)]
    assert offline.call_tool("get_news", {"ticker": "AAPL", "start_date": "2025-02-20",
                                          "end_date": "2025-02-25"},
                             dt.date(2025, 2, 25)).text == first_news.text
    assert offline.identity("AAPL") == first_id
    assert dead.calls == 0
    # without the cache the same offline session has nothing to give
    with pytest.raises(DataError, match="yfinance"):
        MarketData(vendors=YF, session=_session(dead)).closes("NVDA", start, end)


def _archive_with_profile(shared_data, tmp_path, **changes: dict) -> ArchiveAdapter:
    """The recorded AAPL responses with some fields replaced: ``quote`` for the v7 quote,
    else a quoteSummary module (module -> fields)."""
    folder = tmp_path / "yahoo"
    shutil.copytree(shared_data / "yahoo", folder)  # a copy in tmp; the shared folder stays
    for name, path in (("quoteSummary-all-AAPL.json", ("quoteSummary",)),
                       ("quote-AAPL.json", ("quoteResponse",))):
        recording = json.loads((folder / name).read_text())
        result = recording["body"][path[0]]["result"][0]
        for module, fields in changes.items():
            if module == "quote" and path == ("quoteResponse",):
                result.update(fields)
            elif module != "quote" and path == ("quoteSummary",):
                result[module].update(fields)
        (folder / name).write_text(json.dumps(recording))
    return ArchiveAdapter(folder)


@pytest.mark.parametrize("placeholder", ["", "None", "n/a", "N/A", "-", "  null "])
def test_placeholder_sector_and_industry_are_missing(shared_data, tmp_path, placeholder):
    adapter = _archive_with_profile(
        shared_data, tmp_path, assetProfile={"sector": placeholder, "industry": "None"},
        summaryProfile={"sector": placeholder, "industry": "None"},
        price={"longName": "n/a"}, quoteType={"longName": "n/a"}, quote={"longName": "n/a"})
    inst = MarketData(vendors=YF, session=_session(adapter)).identity("AAPL")
    assert inst.available and inst.name == "Apple Inc."  # the short name, not "n/a"
    assert (inst.sector, inst.industry) == (None, None)


def test_a_placeholder_name_is_no_name(shared_data, tmp_path):
    fields = {"longName": "None", "shortName": "-"}
    adapter = _archive_with_profile(shared_data, tmp_path, price=fields, quoteType=fields,
                                    quote=fields)
    inst = MarketData(vendors={**YF, "identity": ("yfinance", "synthetic")},
                      session=_session(adapter)).identity("AAPL")
    assert inst.vendor == "synthetic"  # yfinance had no name: the next vendor answered
    inst = MarketData(vendors=YF, session=_session(adapter)).identity("AAPL")
    assert not inst.available and "no name known" in (inst.note or "")
