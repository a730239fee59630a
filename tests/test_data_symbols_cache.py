"""Symbol normalisation, benchmarks, and the DuckDB download cache rules."""
from __future__ import annotations

import datetime as dt

import pytest

from data.cache import Cache, CachedVendor
from data.model import NoData
from data.service import MarketData
from data.symbols import benchmark_for, to_yahoo
from data.vendors.synthetic import SyntheticVendor
from events.config import InvalidInput, validate_ticker


@pytest.mark.parametrize("raw, yahoo", [
    ("BRK.B", "BRK-B"), ("brk.b", "BRK-B"), ("XAUUSD", "GC=F"), ("BTCUSD", "BTC-USD"),
    ("ETHUSD", "ETH-USD"), ("BTC/USDT", "BTC-USD"), ("EURUSD", "EURUSD=X"),
    ("TSE:7203", "7203.T"), ("LON:VOD", "VOD.L"), ("NASDAQ:AAPL", "AAPL"),
    ("NYSE:BRK.B", "BRK-B"), ("HKEX:700", "0700.HK"), ("VOD.L", "VOD.L"), ("SPX", "^GSPC"),
    ("^GSPC", "^GSPC"), (" nvda ", "NVDA"),
    # dash-written stablecoin pairs, and a broker's trailing "+" (issue 12)
    ("BTC-USDT", "BTC-USD"), ("ETH-USDC", "ETH-USD"), ("eth-usdt", "ETH-USD"),
    ("BTC-USD", "BTC-USD"), ("XAUUSD+", "GC=F"), ("EURUSD+", "EURUSD=X"), ("NVDA+", "NVDA"),
    ("BTCUSDT+", "BTC-USD")])
def test_to_yahoo(raw, yahoo):
    assert to_yahoo(raw) == yahoo


@pytest.mark.parametrize("raw", [5, 3.5, ["NVDA"], {"t": "NVDA"}, b"NVDA", True])
def test_a_ticker_that_is_not_text_gets_the_bad_symbol_error(raw):
    with pytest.raises(InvalidInput) as bad_string:
        validate_ticker("A;DROP")
    for check in (validate_ticker, to_yahoo):
        with pytest.raises(InvalidInput) as got:
            check(raw)
        message = str(got.value)
        assert message == f"ticker {raw!r}" + str(bad_string.value).split("'A;DROP'", 1)[1]


def test_unsafe_symbols_are_refused():
    for raw in ("../etc", "A;DROP", "", "^^X"):
        with pytest.raises(InvalidInput):
            to_yahoo(raw)


@pytest.mark.parametrize("ticker, bench", [
    ("7203.T", "^N225"), ("TSE:7203", "^N225"), ("0700.HK", "^HSI"), ("VOD.L", "^FTSE"),
    ("RY.TO", "^GSPTSE"), ("BHP.AX", "^AXJO"), ("RELIANCE.NS", "^NSEI"),
    ("500325.BO", "^BSESN"), ("600519.SS", "000001.SS"), ("000001.SZ", "399001.SZ"),
    ("NVDA", "SPY"), ("BRK.B", "SPY")])
def test_benchmark_by_suffix(ticker, bench):
    assert benchmark_for(ticker) == bench
    assert MarketData().benchmark_for(ticker, configured="qqq") == "QQQ"


class Counting:
    """A remote-style vendor: synthetic bars, counts calls, can be switched off."""
    name = "yfinance"

    def __init__(self):
        self.calls, self.down, self.empty = 0, False, False
        self.inner = SyntheticVendor()

    def prices(self, symbol, start, end):
        self.calls += 1
        if self.down:
            raise ConnectionError("offline")
        if self.empty:
            return self.inner.prices(symbol, start, end).iloc[0:0]
        return self.inner.prices(symbol, start, end)


def test_cache_covers_ranges_never_past_fetch_and_retries_poison(tmp_path):
    inner = Counting()
    vendor = CachedVendor(inner, Cache(tmp_path / "c.duckdb"))
    jan, jun, jul = dt.date(2023, 1, 2), dt.date(2023, 6, 30), dt.date(2023, 7, 31)
    full = vendor.prices("ACME", jan, jun)
    assert inner.calls == 1
    inside = vendor.prices("ACME", dt.date(2023, 3, 1), dt.date(2023, 3, 31))
    assert inner.calls == 1 and len(inside) == 23
    assert inside["close"].equals(full.loc["2023-03-01":"2023-03-31", "close"])
    longer = vendor.prices("ACME", jan, jul)  # past what was fetched: goes to the vendor
    assert inner.calls == 2 and longer.index[-1].date() == jul
    # an empty answer is not stored, so the next call fetches again
    inner.empty = True
    assert vendor.prices("OTHER", jan, jun).empty
    inner.empty = False
    assert not vendor.prices("OTHER", jan, jun).empty and inner.calls == 4
    # vendor down: an overlapping stored range is served, clipped to the request
    inner.down = True
    stale = vendor.prices("ACME", dt.date(2023, 7, 3), dt.date(2023, 8, 31))
    assert stale.index[0].date() == dt.date(2023, 7, 3) and stale.index[-1].date() == jul
    with pytest.raises(ConnectionError):
        vendor.prices("NEVER", jan, jun)


def test_cache_passes_no_data_through(tmp_path):
    class Empty:
        name = "yfinance"

        def news(self, *a):
            raise NoData("nothing")
    with pytest.raises(NoData):
        CachedVendor(Empty(), Cache(tmp_path / "c.duckdb")).news("X", dt.date.today(),
                                                               dt.date.today())
    assert not hasattr(CachedVendor(Empty(), Cache(tmp_path / "c.duckdb")), "prices")


def test_cache_is_safe_from_many_threads(tmp_path):
    """The market-data actor calls MarketData from a thread pool."""
    import concurrent.futures as cf
    cache = Cache(tmp_path / "c.duckdb")

    def work(i):
        cache.put("v", "identity", f"K{i % 4}", None, None, 1, f'"{i % 4}"')
        return cache.get("v", "identity", f"K{i % 4}") == f'"{i % 4}"'
    with cf.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(80)))
