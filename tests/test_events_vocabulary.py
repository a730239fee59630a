"""The small pure pieces of the vocabulary: rating/action parsing (deterministic, so replay
re-derives the same rating), decision schemas' tolerant price fields, and input validation
(tickers end up in paths and queries, dates must not look ahead)."""
from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from events.config import RunConfig
from events.errors import InvalidInput
from events.inputs import validate_ticker, validate_trade_date
from events.decisions import PortfolioDecision, TradeProposal
from events.rating import Rating, TraderAction, parse_action, parse_rating


# ---- rating / action parsing ---------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("**Rating**: Overweight\n\nWe like the trend, but a Sell-off is possible.", Rating.OVERWEIGHT),
    ("Sell pressure builds.\n**Rating**: Buy", Rating.BUY),  # the rating line beats word order
    ("Rating - underweight", Rating.UNDERWEIGHT),
    ("Rating: strong\nFinal rating: Sell", Rating.SELL),  # first line that names a tier
    ("We would Hold here; a buy later maybe.", Rating.HOLD),  # first tier word anywhere
    ("Momentum argues for an Overweight stance, not a Sell.", Rating.OVERWEIGHT),
    ("No view at all.", Rating.HOLD),
    ("", Rating.HOLD),
    ("Buyback announced; overweighting is wrong", Rating.HOLD),  # whole words only
])
def test_parse_rating(text, expected):
    assert parse_rating(text) is expected


def test_parse_rating_default_is_configurable():
    assert parse_rating("nothing here", default=Rating.SELL) is Rating.SELL


@pytest.mark.parametrize("text,expected", [
    ("I'd hold for now. FINAL TRANSACTION PROPOSAL: **BUY**", TraderAction.BUY),
    ("Sell the rally.", TraderAction.SELL),
    ("final transaction proposal: **sell**", TraderAction.SELL),
    ("no decision", TraderAction.HOLD),
])
def test_parse_action(text, expected):
    assert parse_action(text) is expected


@pytest.mark.parametrize("nullish", ["none", "N/A", " tbd ", "", "null", "-"])
def test_nullish_strings_in_optional_price_fields_become_none(nullish):
    proposal = TradeProposal(action="Buy", reasoning="r", entry_price=nullish, stop_loss=nullish,
                             position_sizing=nullish)
    assert (proposal.entry_price, proposal.stop_loss, proposal.position_sizing) == \
        (None, None, None)
    decision = PortfolioDecision(rating="Hold", executive_summary="s", investment_thesis="t",
                                 price_target=nullish, time_horizon=nullish)
    assert (decision.price_target, decision.time_horizon) == (None, None)


def test_real_prices_still_parse_and_garbage_is_refused():
    assert TradeProposal(action="Sell", reasoning="r", entry_price="101.5").entry_price == 101.5
    with pytest.raises(ValidationError):
        TradeProposal(action="Sell", reasoning="r", stop_loss="soon")


# ---- tickers and dates ---------------------------------------------------------------------
@pytest.mark.parametrize("raw,expected", [
    ("NVDA", "NVDA"), (" nvda ", "NVDA"), ("BRK-B", "BRK-B"), ("7203.T", "7203.T"),
    ("BTC-USD", "BTC-USD"), ("GC=F", "GC=F"), ("^GSPC", "^GSPC"),
])
def test_validate_ticker_accepts_real_symbols(raw, expected):
    assert validate_ticker(raw) == expected


@pytest.mark.parametrize("raw", ["../../etc/x", "..", "", "   ", "A/B", "A" * 40, "NV DA",
                                 "-", "NVDA;DROP", "^"])
def test_validate_ticker_rejects_unsafe_input(raw):
    with pytest.raises(InvalidInput):
        validate_ticker(raw)


def test_validate_trade_date():
    today = dt.date(2024, 6, 1)
    assert validate_trade_date("2024-05-10", today=today) == dt.date(2024, 5, 10)
    assert validate_trade_date(dt.date(2024, 6, 1), today=today) == today
    for bad in ("2024-13-01", "yesterday", "2024-02-30"):
        with pytest.raises(InvalidInput, match="YYYY-MM-DD"):
            validate_trade_date(bad, today=today)
    with pytest.raises(InvalidInput, match="in the future"):
        validate_trade_date("2024-06-02", today=today)
    with pytest.raises(InvalidInput, match="in the future"):
        validate_trade_date(dt.date.today() + dt.timedelta(days=1))


# ---- RunConfig -----------------------------------------------------------------------------
def test_run_config_normalises_and_fills_defaults():
    config = RunConfig(ticker="nvda", trade_date="2024-05-10", analysts=("news", "market"))
    assert config.ticker == "NVDA"
    assert config.analysts == ("market", "news")  # canonical order
    assert config.vendors["news"] == ("yfinance",) and config.is_offline


@pytest.mark.parametrize("changes,message", [
    ({"analysts": ()}, "at least one analyst"),
    ({"analysts": ("market", "astrology")}, "analysts"),
    ({"analysts": ("news", "news")}, "analysts repeat"),
    ({"debate_rounds": 0}, "debate_rounds"),
    ({"risk_rounds": 0}, "risk_rounds"),
    ({"vendors": {"weather": ("x",)}}, "unknown data categories"),
    ({"ticker": "../x"}, "not a valid symbol"),
])
def test_run_config_rejects_bad_settings(changes, message):
    with pytest.raises(ValidationError, match=message):
        RunConfig(**{"ticker": "NVDA", "trade_date": "2024-05-10", **changes})


def test_run_config_checks_vendor_chains_against_the_catalogue():
    import datetime as dt

    import pytest
    from pydantic import ValidationError

    from events.config import RunConfig
    base = dict(ticker="NVDA", trade_date=dt.date(2024, 5, 10))
    with pytest.raises(ValidationError, match="vendor 'reddit' cannot serve prices"):
        RunConfig(**base, vendors={"prices": ("reddit",)})
    with pytest.raises(ValidationError, match="unknown data vendors: finnhub"):
        RunConfig(**base, tool_vendors={"get_news": ("finnhub",)})
    ok = RunConfig(**base, vendors={"prices": ("yfinance", "local")})
    assert ok.vendors["prices"] == ("yfinance", "local") and ok.vendors["social"]
