"""Alpha Vantage, Reddit and StockTwits at the network boundary: a transport adapter serves
bodies shaped like each service's documented responses; our parsing and routing are real."""
from __future__ import annotations

import datetime as dt
import json
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from requests.adapters import BaseAdapter
from requests.models import Response

from data.service import DataError, MarketData

D = dt.date(2024, 5, 10)
AV_DAILY = {"Meta Data": {"2. Symbol": "IBM"}, "Time Series (Daily)": {
    "2024-05-13": {"1. open": "167.5", "2. high": "168.0", "3. low": "166.0",
                   "4. close": "167.0", "5. volume": "3000000"},
    "2024-05-10": {"1. open": "167.0", "2. high": "169.1", "3. low": "166.5",
                   "4. close": "167.15", "5. volume": "2500000"},
    "2024-05-09": {"1. open": "168.0", "2. high": "168.5", "3. low": "166.0",
                   "4. close": "166.27", "5. volume": "2700000"}}}
AV = {
    "TIME_SERIES_DAILY": AV_DAILY,
    "INCOME_STATEMENT": {"symbol": "IBM", "quarterlyReports": [
        {"fiscalDateEnding": "2024-06-30", "reportedCurrency": "USD", "totalRevenue": "15770000000"},
        {"fiscalDateEnding": "2024-03-31", "reportedCurrency": "USD", "totalRevenue": "14462000000"}],
        "annualReports": []},
    "NEWS_SENTIMENT": {"items": "2", "feed": [
        {"title": "IBM beats estimates", "time_published": "20240509T201500",
         "source": "Benzinga", "summary": "Revenue up.", "url": "https://example.com/a"},
        {"title": "IBM after the date", "time_published": "20240511T090000", "source": "X"}]},
    "INSIDER_TRANSACTIONS": {"data": [
        {"transaction_date": "2024-05-01", "ticker": "IBM", "executive": "Doe, Jane",
         "executive_title": "CFO", "security_type": "Common Stock",
         "acquisition_or_disposal": "D", "shares": "1000.0", "share_price": "167.0"},
        {"transaction_date": "2024-05-20", "ticker": "IBM", "executive": "Roe, Rick",
         "executive_title": "Director", "acquisition_or_disposal": "A", "shares": "10"}]},
}
REDDIT = {"data": {"children": [
    {"data": {"title": "NVDA earnings play", "selftext": "calls", "author": "wsb_user",
              "score": 42, "created_utc": 1715270400}},      # 2024-05-09
    {"data": {"title": "NVDA after", "selftext": "", "author": "late", "score": 1,
              "created_utc": 1715500000}}]}}                 # 2024-05-12
# Reddit's search feed: the post body is escaped HTML in <content>, then Reddit's footer.
ATOM = """<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom">
<entry><author><name>/u/feeduser</name><uri>https://www.reddit.com/user/feeduser</uri></author>
<category term="stocks" label="r/stocks"/>
<content type="html">&lt;!-- SC_OFF --&gt;&lt;div class=&quot;md&quot;&gt;&lt;p&gt;Data center revenue up 427% &amp;amp; guidance raised.&lt;/p&gt; &lt;p&gt;Holding into the split.&lt;/p&gt;&lt;/div&gt;&lt;!-- SC_ON --&gt; &amp;#32; submitted by &amp;#32; &lt;a href=&quot;https://www.reddit.com/user/feeduser&quot;&gt; /u/feeduser &lt;/a&gt; &lt;br/&gt; &lt;span&gt;&lt;a href=&quot;https://www.reddit.com/r/stocks/comments/1cn/x/&quot;&gt;[link]&lt;/a&gt;&lt;/span&gt; &amp;#32; &lt;span&gt;&lt;a href=&quot;https://www.reddit.com/r/stocks/comments/1cn/x/&quot;&gt;[comments]&lt;/a&gt;&lt;/span&gt;</content>
<id>t3_1cnxyz</id><link href="https://www.reddit.com/r/stocks/comments/1cn/x/"/>
<updated>2024-05-08T12:00:00+00:00</updated><published>2024-05-08T12:00:00+00:00</published>
<title>NVDA from the feed</title></entry></feed>"""
TWITS = {"messages": [
    {"id": 1, "body": "$NVDA to the moon", "created_at": "2024-05-10T14:00:00Z",
     "user": {"username": "bull1"}, "entities": {"sentiment": {"basic": "Bullish"}}},
    {"id": 2, "body": "$NVDA tomorrow", "created_at": "2024-05-11T14:00:00Z",
     "user": {"username": "late"}, "entities": {"sentiment": None}}]}


class Fake(BaseAdapter):
    def __init__(self, route):
        super().__init__()
        self.route, self.calls = route, []

    def send(self, request, **kwargs):
        self.calls.append(request.url)
        status, body = self.route(urlsplit(request.url))
        resp = Response()
        resp.status_code, resp.url, resp.request = status, request.url, request
        resp._content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return resp

    def close(self):
        """Nothing to release."""


def session(route) -> tuple[requests.Session, Fake]:
    s, a = requests.Session(), Fake(route)
    s.mount("https://", a)
    return s, a


def av_route(u):
    return 200, AV.get(parse_qs(u.query)["function"][0], {})


@pytest.fixture
def av_key(monkeypatch):
    monkeypatch.setenv("ALPHA_VANTAGE_API_KEY", "demo")


def test_alpha_vantage_parses_and_guards(av_key):
    s, fake = session(av_route)
    md = MarketData(vendors={k: ("alpha_vantage",) for k in ("prices", "fundamentals", "news")},
                    session=s)
    px = md.call_tool("get_stock_data", {"symbol": "IBM", "start_date": "2024-05-01",
                                         "end_date": "2024-05-31"}, D)
    assert px.vendor == "alpha_vantage" and "2024-05-10,167.0000,169.1000,166.5000,167.1500" \
        in px.text and "2024-05-13" not in px.text
    inc = md.call_tool("get_income_statement", {"ticker": "IBM", "curr_date": "2024-05-10"}, D)
    assert "2024-03-31" in inc.text and "14,462,000,000" in inc.text and "2024-06-30" not in inc.text
    news = md.call_tool("get_news", {"ticker": "IBM", "start_date": "2024-05-01",
                                     "end_date": "2024-05-10"}, D)
    assert "IBM beats estimates" in news.text and "after the date" not in news.text
    ins = md.call_tool("get_insider_transactions", {"ticker": "IBM", "curr_date": "2024-05-10"}, D)
    assert "Doe, Jane (CFO) | Disposal" in ins.text and "167,000" in ins.text
    assert "Roe" not in ins.text
    assert all("apikey=demo" in c for c in fake.calls)


def test_alpha_vantage_without_key_is_skipped(monkeypatch, ohlcv_dir):
    monkeypatch.delenv("ALPHA_VANTAGE_API_KEY", raising=False)
    s, fake = session(av_route)
    md = MarketData(vendors={"prices": ("alpha_vantage", "local")}, data_dir=str(ohlcv_dir),
                    session=s)
    res = md.call_tool("get_stock_data", {"symbol": "NVDA", "start_date": "2024-05-01",
                                          "end_date": "2024-05-10"}, D)
    assert res.vendor == "local" and fake.calls == []
    only = MarketData(vendors={"prices": ("alpha_vantage",)}, session=s).call_tool(
        "get_stock_data", {"symbol": "NVDA", "start_date": "2024-05-01",
                           "end_date": "2024-05-10"}, D)
    assert only.status == "no_data" and "ALPHA_VANTAGE_API_KEY is not set" in only.text


def test_alpha_vantage_rate_limit_note_moves_on(av_key, ohlcv_dir):
    note = {"Information": "Thank you for using Alpha Vantage! Our standard API rate limit "
                           "is 25 requests per day."}
    s, _ = session(lambda u: (200, note))
    md = MarketData(vendors={"prices": ("alpha_vantage", "local")}, data_dir=str(ohlcv_dir),
                    session=s)
    got = md.bars("NVDA", dt.date(2024, 5, 1), D)
    assert got.vendor == "local" and "alpha_vantage: rate limited" in got.reasons[0]


#: Refusal replies in Alpha Vantage's documented shapes (HTTP 200, one text field).
AV_DAILY_QUOTA = {"Information": (
    "We have detected your API key as K3YK3YK3Y and our standard API rate limit is 25 "
    "requests per day. Please subscribe to any of the premium plans at "
    "https://www.alphavantage.co/premium/ to instantly remove all daily rate limits.")}
AV_PER_MINUTE = {"Note": (
    "Thank you for using Alpha Vantage! Our standard API call frequency is 5 calls per minute "
    "and 500 calls per day. Please visit https://www.alphavantage.co/premium/ if you would like "
    "to target a higher API call frequency.")}
AV_INVALID_KEY = {"Error Message": (
    "the parameter apikey is invalid or missing. Please claim your free API key on "
    "(https://www.alphavantage.co/support/#api-key). It should take less than 20 seconds.")}
AV_DEMO_KEY = {"Information": (
    "The **demo** API key is for demo purposes only. Please claim your free API key at "
    "(https://www.alphavantage.co/support/#api-key) to explore our full API offerings. "
    "It takes fewer than 20 seconds.")}
AV_UNKNOWN_SYMBOL = {"Error Message": (
    "Invalid API call. Please retry or visit the documentation "
    "(https://www.alphavantage.co/documentation/) for TIME_SERIES_DAILY.")}


@pytest.mark.parametrize("reply", [AV_INVALID_KEY, AV_DEMO_KEY])
def test_alpha_vantage_key_refusal_is_an_authentication_error(av_key, ohlcv_dir, reply):
    s, _ = session(lambda u: (200, reply))
    md = MarketData(vendors={"prices": ("alpha_vantage",)}, session=s)
    with pytest.raises(DataError) as failed:
        md.bars("NVDA", dt.date(2024, 5, 1), D)
    message = str(failed.value)
    assert "alpha_vantage: authentication failed" in message
    assert "ALPHA_VANTAGE_API_KEY" in message and "rate limited" not in message
    assert "\n" not in message
    # another vendor in the chain still answers; the refusal stays among the reasons
    md = MarketData(vendors={"prices": ("alpha_vantage", "local")}, data_dir=str(ohlcv_dir),
                    session=s)
    got = md.bars("NVDA", dt.date(2024, 5, 1), D)
    assert got.vendor == "local" and "authentication failed" in got.reasons[0]


@pytest.mark.parametrize("reply", [AV_DAILY_QUOTA, AV_PER_MINUTE])
def test_alpha_vantage_throttling_stays_a_rate_limit(av_key, reply):
    s, _ = session(lambda u: (200, reply))
    md = MarketData(vendors={"prices": ("alpha_vantage",)}, session=s)
    with pytest.raises(DataError) as failed:
        md.bars("NVDA", dt.date(2024, 5, 1), D)
    assert "alpha_vantage: rate limited" in str(failed.value)
    assert "authentication" not in str(failed.value)


def test_alpha_vantage_unknown_symbol_is_no_data(av_key):
    s, _ = session(lambda u: (200, AV_UNKNOWN_SYMBOL))
    got = MarketData(vendors={"prices": ("alpha_vantage",)}, session=s).bars(
        "ZZZZ", dt.date(2024, 5, 1), D)
    assert not got.found and "Invalid API call" in got.reasons[0]


def social_route(u):
    if "stocktwits" in u.netloc:
        return 200, TWITS
    if u.path.endswith("search.json"):
        return (403, {"error": 403}) if "/r/stocks/" in u.path else (200, REDDIT)
    return 200, ATOM.encode()


def test_reddit_json_atom_fallback_and_stocktwits():
    s, fake = session(social_route)
    md = MarketData(session=s)
    res = md.call_tool("get_social_posts", {"ticker": "NVDA", "curr_date": "2024-05-10"}, D)
    assert res.status == "ok" and res.vendor == "reddit+stocktwits"
    assert "wsb_user: NVDA earnings play - calls" in res.text
    # r/stocks refused JSON, its Atom feed answered: the title and the post body, as text
    assert ("feeduser: NVDA from the feed - Data center revenue up 427% & guidance raised. "
            "Holding into the split.\n") in res.text + "\n"
    assert "submitted by" not in res.text and "<p>" not in res.text
    assert "bull1 [bullish]: $NVDA to the moon" in res.text
    assert "NVDA after" not in res.text and "tomorrow" not in res.text
    assert sum("/r/" in c for c in fake.calls) == 4


def test_social_failure_is_unavailable_not_a_crash():
    def down(u):
        raise requests.ConnectionError("no route to host")
    s, _ = session(lambda u: down(u))
    res = MarketData(session=s).call_tool("get_social_posts", {"ticker": "NVDA"}, D)
    assert res.status == "no_data" and res.text.startswith("NO_DATA_AVAILABLE")
    assert "reddit: unavailable (reddit unavailable" in res.text
    assert "stocktwits: unavailable (no route to host)" in res.text
