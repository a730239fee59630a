"""FRED macro indicators and Polymarket odds at the network boundary (issue 12): a transport
adapter serves bodies in each API's documented shape; our vendors, router, look-ahead guards
and tools are real. Also: the synthetic stand-ins and a whole offline run."""
from __future__ import annotations

import datetime as dt
import json
from urllib.parse import parse_qs, urlsplit

import pytest
from test_data_remote import session

from data.service import DataError, MarketData
from data.tools import TOOLS
from events.duckdb_store import DuckDBEventStore
from events.roles import TOOLS_OF_ROLE

D = dt.date(2024, 5, 10)
ONLINE = {"macro": ("fred",), "predictions": ("polymarket",)}


# --- FRED: /fred/series/observations, with ALFRED vintages --------------------------------
#: Two vintages of CPI: March's first print (known on 2024-05-10), then April's release on
#: 2024-05-15, which also revised March.
CPI_VINTAGES = [
    (dt.date(2024, 4, 10), {"2023-03-01": "301.808", "2024-02-01": "311.054",
                            "2024-03-01": "312.230"}),
    (dt.date(2024, 5, 15), {"2023-03-01": "301.808", "2024-02-01": "311.054",
                            "2024-03-01": "312.332", "2024-04-01": "313.207"}),
]
DFF = {"2023-05-10": "5.08", "2024-05-08": "5.33", "2024-05-09": "5.33",
       "2024-05-13": "5.33"}  # the last one after the trade date: a server ignoring the range


def fred_body(series: str, q: dict) -> dict:
    as_of = dt.date.fromisoformat(q["realtime_end"][0])
    if series == "CPIAUCSL":
        vintage = [v for day, v in CPI_VINTAGES if day <= as_of][-1]
    elif series == "DFF":
        vintage = DFF
    else:
        vintage = {"2024-04-01": "."}  # FRED's missing value
    observations = [{"realtime_start": q["realtime_start"][0], "realtime_end": q["realtime_end"][0],
                     "date": day, "value": value} for day, value in sorted(vintage.items())]
    return {"realtime_start": q["realtime_start"][0], "realtime_end": q["realtime_end"][0],
            "observation_start": q["observation_start"][0],
            "observation_end": q["observation_end"][0], "units": "lin", "output_type": 1,
            "file_type": "json", "order_by": "observation_date", "sort_order": "asc",
            "count": len(observations), "offset": 0, "limit": 100000,
            "observations": observations}


def fred_route(u):
    q = parse_qs(u.query)
    assert u.netloc == "api.stlouisfed.org" and u.path == "/fred/series/observations"
    return 200, fred_body(q["series_id"][0], q)


@pytest.fixture
def fred_key(monkeypatch):
    monkeypatch.setenv("FRED_API_KEY", "abcdefghijklmnopqrstuvwxyz123456")


def test_fred_values_as_published_on_the_trade_date(fred_key):
    s, fake = session(fred_route)
    md = MarketData(vendors=ONLINE, session=s)
    res = md.call_tool("get_macro_indicators", {"curr_date": "2024-05-10",
                                                "series": ["CPIAUCSL", "DFF", "UNRATE"]}, D)
    assert res.status == "ok" and res.vendor == "fred"
    assert "latest: 312.23 on 2024-03-01" in res.text  # March's first print
    assert "313.207" not in res.text and "312.332" not in res.text  # released later
    assert "a year earlier: 301.808 on 2023-03-01 (change +10.422, +3.45%)" in res.text
    assert "latest: 5.33 on 2024-05-09" in res.text and "2024-05-13" not in res.text
    assert "a year earlier: 5.08 on 2023-05-10 (change +0.25)" in res.text
    assert "(no data: UNRATE: fred: no UNRATE observations" in res.text  # only "." values
    for url in fake.calls:
        q = parse_qs(urlsplit(url).query)
        assert q["realtime_start"] == q["realtime_end"] == ["2024-05-10"]
        assert q["observation_end"] == ["2024-05-10"] and q["file_type"] == ["json"]
        assert q["api_key"] == ["abcdefghijklmnopqrstuvwxyz123456"]
    # a later trade date sees the later release and the revision
    later = md.call_tool("get_macro_indicators", {"series": "CPIAUCSL"}, dt.date(2024, 5, 20))
    assert "latest: 313.207 on 2024-04-01" in later.text
    assert "previous: 312.332 on 2024-03-01" in later.text


def test_fred_without_a_key_says_which_variable(monkeypatch):
    monkeypatch.delenv("FRED_API_KEY", raising=False)
    s, fake = session(fred_route)
    res = MarketData(vendors=ONLINE, session=s).call_tool("get_macro_indicators", {}, D)
    assert res.status == "no_data" and "FRED_API_KEY is not set" in res.text
    assert fake.calls == []


def test_fred_refused_key_and_throttle(fred_key):
    refused = {"error_code": 400, "error_message": (
        "Bad Request.  The value for variable api_key is not registered.  Read "
        "https://fred.stlouisfed.org/docs/api/api_key.html for more information.")}
    s, _ = session(lambda u: (400, refused))
    with pytest.raises(DataError, match="fred: authentication failed .*FRED_API_KEY"):
        MarketData(vendors=ONLINE, session=s).macro("DFF", D)
    # to the analyst it is a note (macro data is context; the run goes on), naming the key
    res = MarketData(vendors=ONLINE, session=s).call_tool("get_macro_indicators", {}, D)
    assert res.status == "no_data" and "FRED refused the key in FRED_API_KEY" in res.text
    s, _ = session(lambda u: (429, {"error_code": 429, "error_message":
                                    "Too Many Requests.  Exceeded Rate Limit"}))
    with pytest.raises(DataError, match="fred: rate limited"):
        MarketData(vendors=ONLINE, session=s).macro("DFF", D)
    unknown = {"error_code": 400, "error_message": "Bad Request.  The series does not exist."}
    s, _ = session(lambda u: (400, unknown))
    got = MarketData(vendors=ONLINE, session=s).macro("DFF", D)
    assert not got.found and "The series does not exist" in got.reasons[0]


# --- Polymarket: Gamma public search + CLOB price history ---------------------------------
def _market(question, created, token, prices, volume, closed=False):
    return {"id": token[-4:], "question": question, "conditionId": f"0x{token}",
            "slug": question.lower().replace(" ", "-")[:40], "createdAt": created,
            "endDate": "2024-06-30T12:00:00Z", "outcomes": "[\"Yes\", \"No\"]",
            "outcomePrices": json.dumps([str(p) for p in prices]), "volume": str(volume),
            "volumeNum": volume, "active": True, "closed": closed,
            "clobTokenIds": json.dumps([f"{token}1", f"{token}2"])}


SEARCH = {"events": [
    {"id": "9031", "slug": "nvidia-largest-company", "title": "NVIDIA largest company by June 30?",
     "createdAt": "2024-04-02T15:04:05.123Z", "endDate": "2024-06-30T12:00:00Z", "closed": True,
     "markets": [
         # resolved Yes after the trade date: today's price (1) is the future
         _market("Will NVIDIA be the largest company in the world on June 30?",
                 "2024-04-02T15:04:05.123Z", "7135", (1, 0), 2345678.9, closed=True),
         # opened after the trade date: never shown
         _market("Will NVIDIA close June above $150?", "2024-05-20T09:00:00Z", "8800",
                 (0.4, 0.6), 5000000.0),
         # opened before, but no trade before the trade date
         _market("Will NVIDIA split its stock again in 2024?", "2024-03-01T10:00:00Z", "6600",
                 (0.2, 0.8), 1000.0)]}],
    "tags": [], "profiles": [], "pagination": {"hasMore": False, "totalResults": 1}}
END_OF_D = int(dt.datetime(2024, 5, 10, 23, 59, 59, tzinfo=dt.timezone.utc).timestamp())
HISTORY = {"71351": {"history": [{"t": END_OF_D - 86400, "p": 0.27}, {"t": END_OF_D - 4 * 3600,
                                  "p": 0.31}, {"t": END_OF_D + 3600, "p": 0.45}]},
           "66001": {"history": []}}


def polymarket_route(u):
    q = parse_qs(u.query)
    if u.netloc == "gamma-api.polymarket.com" and u.path == "/public-search":
        return 200, SEARCH if "nvidia" in q["q"][0].lower() else {"events": [], "tags": []}
    assert u.netloc == "clob.polymarket.com" and u.path == "/prices-history"
    assert int(q["endTs"][0]) == END_OF_D
    return 200, HISTORY.get(q["market"][0], {"history": []})


def test_polymarket_keeps_markets_opened_by_the_trade_date_priced_then():
    s, fake = session(polymarket_route)
    md = MarketData(vendors=ONLINE, session=s)
    res = md.call_tool("get_prediction_markets", {"query": "NVIDIA", "curr_date": "2024-05-10"},
                       D)
    assert res.status == "ok" and res.vendor == "polymarket"
    assert ("- Will NVIDIA be the largest company in the world on June 30? | opened 2024-04-02 "
            "| closes 2024-06-30 | Yes 0.31, No 0.69 (quoted 2024-05-10 19:59 UTC) | volume "
            "2,345,679") in res.text
    assert "above $150" not in res.text  # opened on 2024-05-20
    assert "split its stock again in 2024? | opened 2024-03-01 | closes 2024-06-30 | no price " \
           "quoted by the trade date" in res.text
    assert "0.45" not in res.text and "Yes 1" not in res.text  # after the date / resolved
    assert not any("8800" in c for c in fake.calls)  # nothing fetched for a future market
    none = md.call_tool("get_prediction_markets", {"query": "Zzyzx"}, D)
    assert none.status == "no_data" and "no Polymarket markets match 'Zzyzx'" in none.text


def test_polymarket_on_today_uses_the_live_prices():
    today = dt.datetime.now(dt.timezone.utc).date()
    market = _market("Will it rain?", (dt.datetime.now(dt.timezone.utc)
                                       - dt.timedelta(days=3)).isoformat(), "5500", (0.7, 0.3), 10)
    s, fake = session(lambda u: (200, {"events": [{"title": "Weather", "markets": [market]}]}))
    got = MarketData(vendors=ONLINE, session=s).predictions("rain", today)
    (p,) = got.value
    assert p.prices == (0.7, 0.3) and p.priced_at.date() == today
    assert not any("prices-history" in c for c in fake.calls)


def test_the_service_drops_future_markets_and_prices_from_any_vendor():
    class Leaky:
        name = "polymarket"

        def predictions(self, query, trade_date, limit):
            from data.vendors.synthetic import SyntheticVendor
            fine, = SyntheticVendor().predictions(query, trade_date, 1)
            later = dt.datetime(2024, 5, 11, 1, tzinfo=dt.timezone.utc)
            return [fine.model_copy(update={"priced_at": later}),
                    fine.model_copy(update={"question": "future", "created": later})]
    md = MarketData(vendors=ONLINE)
    md._instances["polymarket"] = Leaky()
    (kept,) = md.predictions("X", D).value
    assert kept.question != "future" and kept.prices == () and kept.priced_at is None


# --- tables, synthetic, and a whole offline run -------------------------------------------
def test_the_news_analyst_has_both_tools():
    assert {"get_macro_indicators", "get_prediction_markets"} <= set(TOOLS_OF_ROLE["news"])
    assert TOOLS["get_macro_indicators"].category == "macro"
    assert TOOLS["get_prediction_markets"].category == "predictions"


def test_a_config_naming_only_the_first_six_categories_stays_offline():
    from events.config import RunConfig, complete_chains
    six = {k: ("synthetic",) for k in ("prices", "indicators", "fundamentals", "news",
                                       "social", "identity")}
    assert complete_chains(six)["macro"] == complete_chains(six)["predictions"] == ("synthetic",)
    remote = complete_chains({"news": ("yfinance",)})
    assert remote["macro"] == ("fred",) and remote["predictions"] == ("polymarket",)
    assert complete_chains({"news": ("yfinance", "local")})["macro"] == ("local",)
    config = RunConfig(ticker="NVDA", trade_date=D, vendors=six)
    assert config.vendors["predictions"] == ("synthetic",)
    assert MarketData(vendors=six).vendors["macro"] == ("synthetic",)


def test_synthetic_macro_is_published_with_a_lag():
    from events.config import OFFLINE_VENDORS
    md = MarketData(vendors=OFFLINE_VENDORS)
    cpi = md.macro("CPIAUCSL", D).value
    assert cpi[-1].date == dt.date(2024, 3, 1)  # April's CPI is not out on May 10
    res = md.call_tool("get_prediction_markets", {"query": "NVDA"}, D)
    assert res.vendor == "synthetic" and "(synthetic)" in res.text


def test_an_offline_run_gives_the_news_analyst_macro_and_odds(cli, store_path):
    result = cli("run", "NVDA", "--date", "2024-05-10", "--offline", "--analysts", "news",
                 "--store", str(store_path), "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    with DuckDBEventStore(store_path, read_only=True) as store:
        events = [e.payload for e in store.read_stream(row["run_id"])]
    calls = {e.tool: e.result for e in events if e.type == "ToolCallCompleted"}
    assert calls["get_macro_indicators"].status == "ok"
    assert calls["get_prediction_markets"].vendor == "synthetic"
    config = next(e for e in events if e.type == "RunRequested").config
    assert config.vendors["macro"] == ("synthetic",)
    report = next(e.report for e in events if e.type == "AnalystReportSubmitted")
    assert "get_macro_indicators" in report and "Federal funds effective rate" in report
