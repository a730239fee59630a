"""The structured sentiment report (issue 12): the band scale and its parsers, the schema and
its free-text fallback, the offline model, and the social analyst's turn through the real
driver and gateway (offline, and over HTTP against the fake OpenAI-compatible server)."""
from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from fake_openai_server import text
from test_llm_runs import RoutedServer, role_of

from actors.driving import RunDriver
from actors.ports import LocalStore, MarketDesk
from events import domain as d
from events.config import OFFLINE_VENDORS, RunConfig
from events.decisions import DECISION_SCHEMAS, SentimentReport
from events.envelope import NewEvent
from events.memory_store import InMemoryEventStore
from events.records import Message
from events.roles import DECISION_OF_ROLE, SCHEMA_OF_ROLE
from events.sentiment import (BAND_SCORE, Confidence, SentimentBand, band_for_score, parse_band,
                              parse_confidence, parse_score, parse_sentiment_line)
from projections.reports import render_reports
from projections.run_state import project
from providers import offline
from providers.base import LLMRequest
from providers.gateway import LLMGateway
from providers.structured import from_freetext, strict_json_schema


# --- the scale --------------------------------------------------------------------------
@pytest.mark.parametrize("text, band", [
    ("Sentiment: Mildly Bullish, score 6.5, confidence medium", SentimentBand.MILDLY_BULLISH),
    ("**Overall sentiment**: Bearish", SentimentBand.BEARISH),
    ("| Band | Mixed |", SentimentBand.MIXED),
    ("Chatter is mildly bearish after the call, though some stay bullish.",
     SentimentBand.MILDLY_BEARISH),
    ("Bullish posts dominate.\nSentiment: Neutral", SentimentBand.NEUTRAL),  # the line wins
    ("nothing to go on", SentimentBand.NEUTRAL)])
def test_parse_band(text, band):
    assert parse_band(text) == band


def test_scores_confidence_and_the_labelled_line():
    assert [band_for_score(s) for s in (0, 2.5, 4.25, 5, 5.75, 7.5, 10)] == [
        SentimentBand.BEARISH, SentimentBand.MILDLY_BEARISH, SentimentBand.NEUTRAL,
        SentimentBand.NEUTRAL, SentimentBand.MILDLY_BULLISH, SentimentBand.BULLISH,
        SentimentBand.BULLISH]
    assert all(band_for_score(BAND_SCORE[b]) == b for b in SentimentBand
               if b != SentimentBand.MIXED)
    assert parse_score("score 7/10") == 7 and parse_score("Score: 75") is None
    assert parse_confidence("high confidence in this read") == Confidence.HIGH
    assert parse_confidence("no idea") == Confidence.LOW
    assert parse_sentiment_line("# Report\nSentiment: Bullish, score 9 out of 10, "
                                "confidence high") == {"band": "Bullish", "score": 9.0,
                                                       "confidence": "high"}
    assert parse_sentiment_line("Sentiment: Mildly Bearish") == {"band": "Mildly Bearish"}
    assert parse_sentiment_line("The crowd is bullish.") is None


# --- the schema -------------------------------------------------------------------------
def test_schema_validates_and_renders():
    report = SentimentReport(band="Mixed", score=5.25, confidence="medium", narrative="n")
    assert report.render().startswith("**Overall sentiment**: Mixed (score 5.25 of 10, medium "
                                      "confidence)\n\nn")
    assert SentimentReport.model_validate({"band": "Bullish", "confidence": "high",
                                           "narrative": "x"}).score == 8.5  # from the band
    with pytest.raises(ValueError, match="outside 0..10"):
        SentimentReport(band="Bullish", score=11, confidence="high", narrative="x")
    with pytest.raises(ValueError):
        SentimentReport(band="Euphoric", score=9, confidence="high", narrative="x")
    schema = strict_json_schema("SentimentReport")
    assert schema["required"] == ["band", "score", "confidence", "narrative"]
    assert schema["properties"]["band"]["enum"] == [b.value for b in SentimentBand]
    assert DECISION_SCHEMAS["SentimentReport"] is SentimentReport
    assert SCHEMA_OF_ROLE["social"] == "SentimentReport" and "social" not in DECISION_OF_ROLE


@pytest.mark.parametrize("reply, expected", [
    ("Band: Mildly Bullish\nScore: 6\nConfidence: high\nNarrative: calls everywhere",
     ("Mildly Bullish", 6.0, "high", "calls everywhere")),
    ("Mostly bearish chatter about guidance. Score: 75. Medium confidence.",
     ("Bearish", 1.5, "medium", None)),  # 75 is no score: the band's
    ("", ("Neutral", 5.0, "low", "(the model returned no text)"))])
def test_free_text_fallback(reply, expected):
    got = from_freetext("SentimentReport", reply)
    assert (got["band"], got["score"], got["confidence"]) == expected[:3]
    assert got["narrative"] == (expected[3] or reply)


# --- the offline model ------------------------------------------------------------------
def _social_messages(posts: str) -> list[Message]:
    return [Message(role="system", content="social"),
            Message(role="user", content="Ticker: NVDA\nTrade date: 2024-05-10"),
            Message(role="assistant", content="", tool_calls=[]),
            Message(role="tool", name="get_social_posts", tool_call_id="c1", content=posts)]


def test_offline_reading_from_mood_tags():
    posts = "# Social posts about NVDA\n" + "\n".join(
        f"- 2024-05-0{i} u{i} [{m}]: text" for i, m in enumerate(
            ["bullish", "bullish", "bullish", "bearish", "neutral", "neutral"], start=1))
    request = LLMRequest(model="offline/quick", role="social", messages=_social_messages(posts),
                         output_schema="SentimentReport")
    reply = asyncio.run(offline.complete(request))
    assert reply.output_mode == "structured"
    assert (reply.structured["band"], reply.structured["score"],
            reply.structured["confidence"]) == ("Mildly Bullish", 7.0, "medium")
    report = asyncio.run(offline.complete(request.model_copy(update={"output_schema": None})))
    assert report.text.rstrip().endswith("Sentiment: Mildly Bullish, score 7, "
                                          "confidence medium")


# --- the social analyst's turn, through the real driver -----------------------------------
def _drive(config: RunConfig) -> list:
    return [e.payload for e in _drive_stored(config)]


def _drive_stored(config: RunConfig) -> list:
    store = InMemoryEventStore()
    store.append("r1", [NewEvent(d.RunRequested(run_id="r1", config=config), "test")],
                 expected_version=0)
    driver = RunDriver(store=LocalStore(store), llm=LLMGateway(), market=MarketDesk(None),
                       owner="w-0/a", follow_interval_s=0.02)
    summary = asyncio.run(driver.drive("r1"))
    assert summary["status"] == "completed", summary
    return store.read_stream("r1")


def _config(**kw) -> RunConfig:
    return RunConfig(ticker="NVDA", trade_date=dt.date(2024, 5, 10), analysts=("social",),
                     vendors=OFFLINE_VENDORS, **kw)


def test_offline_run_reads_the_structure_from_the_reports_own_line():
    stored = _drive_stored(_config())
    events = [e.payload for e in stored]
    (report,) = [e for e in events if e.type == "AnalystReportSubmitted"]
    calls = [e for e in events if e.type == "LLMCallCompleted" and e.role == "social"]
    assert len(calls) == 2  # tools, report: no extra call
    assert report.output_mode == "freetext" and report.sentiment is not None
    line = calls[-1].response_text.strip().splitlines()[-1]
    assert line == (f"Sentiment: {report.sentiment.band.value}, score "
                    f"{report.sentiment.score:g}, confidence {report.sentiment.confidence.value}")
    assert report.sentiment.narrative == calls[-1].response_text.strip()
    assert report.report == report.sentiment.render()
    files = render_reports(project(stored))
    assert files["1_analysts/sentiment.md"].count("**Overall sentiment**: ") == 1


@pytest.fixture
def server():
    with RoutedServer() as s:
        yield s


def test_a_model_that_cannot_structure_falls_back_to_its_text(server, monkeypatch):
    """The structure call gets prose instead of JSON: the free-text fallback reads it."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.route(lambda b: role_of(b) == "social" and bool(b.get("response_format")),
                 text("Overall the crowd turned mildly bearish after the guidance cut; "
                      "medium confidence."))
    events = _drive(_config(quick_model="openai/test-model", deep_model="openai/test-model",
                            base_url=server.url))
    (report,) = [e for e in events if e.type == "AnalystReportSubmitted"]
    assert report.output_mode == "freetext"
    assert (report.sentiment.band, report.sentiment.score, report.sentiment.confidence) == (
        SentimentBand.MILDLY_BEARISH, 3.5, Confidence.MEDIUM)
    calls = [e for e in events if e.type == "LLMCallCompleted" and e.role == "social"]
    assert [c.output_mode for c in calls] == ["freetext", "freetext", "freetext"]
    assert report.sentiment.narrative == calls[1].response_text.strip()  # the report itself
