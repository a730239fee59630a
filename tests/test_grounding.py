"""The grounding audit as a pure function: what counts as a claim, and how each claim is
classified against the sources a role was shown (projections.grounding)."""
from __future__ import annotations

import datetime as dt

import pytest

from events import domain as d
from projections.grounding import Source, classify, extract, mark_flagged

TRADE = dt.date(2024, 5, 10)
SNAPSHOT = Source("snapshot", "\n".join([
    "VERIFIED MARKET SNAPSHOT for NVDA (vendor local); last bar 2024-05-10 on or before trade "
    "date 2024-05-10:",
    "open 90.26 high 91.36 low 89.19 close 89.84 volume 335,325,000",
    "close_50_sma: 87.6343", "close_200_sma: 59.9807", "rsi: 55.2833", "atr: 3.5779",
    "recent closes: 2024-04-19 76.17, 2024-05-06 92.10, 2024-05-09 88.71, 2024-05-10 89.84"]))
TOOL = Source("tool:0:0",
              "get_stock_data(symbol=NVDA, start_date=2024-04-10, end_date=2024-05-10)\n"
              "date,open,high,low,close,volume\n2024-04-19,83.1122,84.2857,75.5717,76.1654,"
              "875198000\n2024-05-10,90.2640,91.3595,89.1865,89.8372,335325000")
SOURCES = [SNAPSHOT, TOOL]


def verdicts(text: str, sources: list[Source] = SOURCES) -> list[tuple[str, str]]:
    return [(f.claim.raw, f.verdict) for f in classify(text, sources, TRADE, "NVDA")]


def raws(text: str) -> list[str]:
    return [c.raw for c in extract(text, TRADE, "NVDA")]


# ---- what is a claim ------------------------------------------------------------------------
@pytest.mark.parametrize("text, claims", [
    # prices, percentages, ratios, counts; $, %, commas, suffixes, negatives
    ("closed at $89.84, up 3.5%", ["$89.84", "3.5%"]),
    ("volume 335,325,000 shares; cap $2.2T; revenue $26.0bn; 45.2M traded; 12k posts",
     ["335,325,000", "$2.2T", "$26.0bn", "45.2M", "12k"]),
    ("MACD at -3.74, P/E 35.2x, 120 analysts", ["-3.74", "35.2x", "120"]),
    ("revenue of 26 billion and 3.5 percent growth", ["26 billion", "3.5 percent"]),
    # dates in several forms; a date after the trade date, a future period
    ("on 2024-04-19, on April 19, 2024, on 19 April 2024 and 04/19/2024",
     ["2024-04-19", "April 19, 2024", "19 April 2024", "04/19/2024"]),
    ("by 2024-12-04 in Q3 2024, H2 2024, June 2024, FY2026 and 2025",
     ["2024-12-04", "Q3 2024", "H2 2024", "June 2024", "FY2026", "2025"]),
])
def test_figures_and_dates_are_extracted(text, claims):
    assert raws(text) == claims


@pytest.mark.parametrize("rule, text", [
    ("1. list numbering", "1. Trend\n2) Momentum\n  3. Risk"),
    ("2. the trade date itself", "As of 2024-05-10 (May 10, 2024) the trend holds."),
    ("2. periods that started by the trade date", "Since 2020, in Q1 2024, in May 2024, FY2025 "
                                                   "and in H1 2024 the stock rose."),
    ("3. glued to letters", "Q3 guidance, the 10-K, close_50_sma and H1 margins"),
    ("3. window lengths", "the 50-day SMA, a 200 day average, 14 days, 52 weeks, "
                          "5 trading sessions, 3-month low"),
    ("3. indicator parameters", "RSI(14) and MACD(12, 26, 9) and Bollinger(20,2)"),
    ("3. index names", "the S&P 500, the Nasdaq 100 and the Russell 2000"),
    ("4. small bare integers", "two points: 3 reasons, round 2, score 7, +1 and -2"),
    ("5. elision, times, the ticker", "... (12 lines omitted) ... at 16:00 for NVDA"),
    ("5. thresholds of a rule", "(-1 if rsi > 70, +1 if rsi < 30); oversold (<30)"),
    ("5. RSI levels", "RSI is below 70, so not overbought; oversold only under 30."),
    ("5. counts of what was shown", "20 data source(s) returned nothing; 12 tools and 15 rows"),
])
def test_what_is_not_a_claim_is_skipped(rule, text):
    assert raws(text) == [], rule


def test_a_number_of_a_skipped_kind_still_counts_with_a_unit():
    # the same small integer is a claim once it has a unit, a decimal or currency
    assert raws("3 reasons, 3%, 3.0 and $3") == ["3%", "3.0", "$3"]


# ---- how a claim is classified --------------------------------------------------------------
def test_grounded_figures_name_the_event_they_came_from():
    found = classify("Close $89.84 on volume of 875,198,000 on 2024-04-19.", SOURCES, TRADE)
    assert [(f.claim.raw, f.verdict, f.source) for f in found] == [
        ("$89.84", "grounded", "snapshot"),
        ("875,198,000", "grounded", "tool:0:0"),
        ("2024-04-19", "grounded", "snapshot")]


@pytest.mark.parametrize("text", [
    "RSI 55.3", "RSI 55.28", "the 50-day SMA is 87.63", "close 89.8",  # rounded
    "the 50-day SMA is 87.634",  # 87.6343 cut at the digits shown
    "volume 335.3M", "volume of 335 million", "0.34 billion shares",  # suffixes
    "the April 19 close",  # a day without its year, found in a source
])
def test_rounded_cut_and_scaled_values_are_grounded(text):
    assert {v for _, v in verdicts(text)} == {"grounded"}


@pytest.mark.parametrize("text, how", [
    ("the close is 2.5% above the 50-day SMA", "% change"),  # 89.84 vs 87.6343
    ("the 50-day average is 27.65 points above the 200-day", "difference"),
    ("up 18% from the April low of $76.17", "% change"),  # 76.17 quoted, 89.84 in snapshot
    ("ATR 3.58, stop at $82.68", "89.84 - 2x3.58"),  # close - 2 x the ATR it quotes
    ("ATR of 3.58 is 4.0% of the price", "share"),
])
def test_derived_figures_say_how(text, how):
    found = classify(text, SOURCES, TRADE)
    derived = [f for f in found if f.verdict == "derived"]
    assert len(derived) == 1 and how in (derived[0].source or ""), found


def test_a_share_or_multiple_needs_an_operand_the_text_quotes():
    # 59.98 / 87.63 = 68.4%: a coincidence of two unquoted figures is not a derivation
    assert verdicts("RSI has climbed to 68.4%.") == [("68.4%", "ungrounded")]
    # a percentage is never the difference of two prices (89.84 - 87.6343 = 2.2)
    assert verdicts("margin of 2.2%") == [("2.2%", "ungrounded")]


def test_invented_figures_are_ungrounded():
    assert verdicts("NVDA closed at $904.12; analysts see $1,050; 45.7% margin.") == [
        ("$904.12", "ungrounded"), ("$1,050", "ungrounded"), ("45.7%", "ungrounded")]


def test_a_past_date_no_source_has_is_ungrounded():
    assert verdicts("Earnings on 2024-02-21 beat.") == [("2024-02-21", "ungrounded")]


def test_dates_and_periods_after_the_trade_date_are_look_ahead_with_their_sentence():
    assert verdicts("By 2024-06-14 the stock reached $131.83. RSI is 55.28.") == [
        ("2024-06-14", "look_ahead"), ("$131.83", "look_ahead"), ("55.28", "grounded")]
    assert verdicts("Q3 2024 revenue of $30.0B; in June 2024; by 2025; FY2026 capex") == [
        ("Q3 2024", "look_ahead"), ("$30.0B", "look_ahead"), ("June 2024", "look_ahead"),
        ("2025", "look_ahead"), ("FY2026", "look_ahead")]


def test_a_future_date_a_source_announces_is_grounded():
    calendar = Source("tool:0:0",
                      "Next earnings date: 2024-05-22 (scheduled)")
    assert verdicts("Earnings are due on 2024-05-22.", [calendar]) == [("2024-05-22",
                                                                        "grounded")]


def test_the_ticker_is_not_read_as_a_figure():
    found = classify("0700.HK closed at 89.84", SOURCES, TRADE, "0700.HK")
    assert [(f.claim.raw, f.verdict) for f in found] == [("89.84", "grounded")]


# ---- marks in the report --------------------------------------------------------------------
def test_flagged_figures_are_marked_and_others_left_alone():
    check = d.GroundingChecked(turn_id="debate:1", role="bull", model="m", grounded=1,
                               flagged=[("2024-12-04", "look_ahead"), ("$904.12", "ungrounded")])
    text = "On 2024-12-04 it hit $904.12 from $89.84; $904.125 is another figure."
    marked = mark_flagged(text, check)
    assert "2024-12-04 **[look-ahead]**" in marked and "$904.12 **[unverified]**" in marked
    assert "$89.84 **" not in marked and "$904.125" in marked  # longer numbers are not hit
    assert marked.startswith("> **Grounding audit:** 2 of 3 figures")
    clean = d.GroundingChecked(turn_id="debate:1", role="bull", model="m", grounded=3)
    assert mark_flagged(text, clean) == text and mark_flagged(text, None) == text


def test_a_report_in_a_decimal_comma_language_is_read_in_its_own_convention():
    """--language Spanish/German/...: 89,84 and 335.325.000 are the snapshot's 89.84 and
    335,325,000; an English-written number in the same report stays as written; the flagged
    figures keep the report's own spelling (so the marks find them)."""
    text = ("El cierre fue de 89,84 USD con un volumen de 335.325.000 acciones; la "
            "close_50_sma está en 87.6343 y el objetivo es 123,45 USD.")
    read = classify(text, SOURCES, TRADE, "NVDA", decimal_comma=True)
    assert [(f.claim.raw, f.verdict) for f in read] == [
        ("89,84", "grounded"), ("335.325.000", "grounded"), ("87.6343", "grounded"),
        ("123,45", "ungrounded")]
    assert read[0].claim.value == 89.84 and read[1].claim.value == 335_325_000
    as_english = [(f.claim.raw, f.verdict) for f in classify(text, SOURCES, TRADE, "NVDA")]
    assert ("89,84", "grounded") not in as_english  # read as 8,984 without the language
    check = d.GroundingChecked(turn_id="analyst:market", role="market", model="m",
                               grounded=3, derived=0, sources={},
                               flagged=[(f.claim.raw, f.verdict) for f in read
                                        if f.verdict == "ungrounded"])
    assert "123,45 **[unverified]** USD" in mark_flagged(text, check)


def test_the_run_language_decides_the_convention():
    from events.config import RunConfig
    from projections.grounding import DECIMAL_COMMA, findings_of
    from projections.run_state import RunState, apply
    assert {"spanish", "german", "brazilian portuguese"} <= DECIMAL_COMMA
    assert "english" not in DECIMAL_COMMA and "japanese" not in DECIMAL_COMMA
    report = d.AnalystReportSubmitted(turn_id="analyst:market", analyst="market",
                                      report="Cierre 89,84.")
    read = {}
    for language in ("Spanish", "English"):
        config = RunConfig(ticker="NVDA", trade_date=TRADE, output_language=language)
        s = apply(RunState(), d.RunRequested(run_id="NVDA-2024-05-10-00000000", config=config))
        read[language] = [(f.claim.raw, f.claim.value) for f in findings_of(s, report) or []]
    assert read["Spanish"] == [("89,84", 89.84)]
    assert read["English"] == [("89", 89.0), ("84", 84.0)]
