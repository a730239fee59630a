"""The rating-following policy and the scorecard as pure functions, on hand-made outcomes:
long, flat and short positions compounded, the bearish choice, unresolved decisions, equal
weights across tickers; the backtest stream's fold; the progress line; the chart file."""
from __future__ import annotations

import datetime as dt

import pytest

from cli.backtest import eta_line
from cli.charts import render_chart
from events import domain as d
from events.config import RunConfig
from events.envelope import NewEvent
from events.memory_store import InMemoryEventStore
from projections.backtest import DecisionOutcome, project_backtest
from projections.scorecard import scorecard

D = dt.date


def _x(ticker, day, rating, raw, bench=0.01, run=None):
    resolved = raw is not None
    return DecisionOutcome(ticker, D(2024, 3, day), run or f"{ticker}-{day}", "completed", rating,
                           100.0 + day, None, raw, raw - bench if resolved else None,
                           "SPY" if resolved else None, bench if resolved else None,
                           5 if resolved else None, D(2024, 3, day + 7) if resolved else None)


DECISIONS = [
    _x("AAA", 1, "Buy", 0.10), _x("AAA", 8, "Hold", -0.05), _x("AAA", 15, "Sell", -0.20),
    _x("AAA", 22, "Overweight", None),  # not resolved yet: counted, not compounded
    _x("BBB", 1, "Underweight", 0.04), _x("BBB", 8, "Hold", 0.002),
]


@pytest.mark.parametrize("bearish,aaa,bbb", [
    ("short", 1.10 * 1.0 * 1.20, 0.96 * 1.0),
    ("flat", 1.10 * 1.0 * 1.0, 1.0 * 1.0),
])
def test_policy_compounds_long_flat_and_short_periods(bearish, aaa, bbb):
    card = {s.ticker: s for s in scorecard(DECISIONS, bearish)}
    assert list(card) == ["AAA", "BBB", "ALL"]
    assert card["AAA"].policy_return == pytest.approx(aaa - 1)
    assert card["AAA"].buy_hold_return == pytest.approx(1.10 * 0.95 * 0.80 - 1)
    assert card["AAA"].benchmark_return == pytest.approx(1.01 ** 3 - 1)
    assert card["BBB"].policy_return == pytest.approx(bbb - 1)
    assert card["ALL"].policy_return == pytest.approx((aaa + bbb) / 2 - 1)
    assert card["ALL"].buy_hold_return == pytest.approx((1.10 * 0.95 * 0.80 + 1.04 * 1.002) / 2
                                                        - 1)
    assert card["ALL"].bearish == bearish


def test_scorecard_counts_holds_hits_and_alpha_by_rating():
    card = {s.ticker: s for s in scorecard(DECISIONS)}
    aaa, every = card["AAA"], card["ALL"]
    assert (aaa.decisions, aaa.resolved, aaa.hold_rate) == (4, 3, 0.25)
    assert aaa.ratings == {"Buy": 1, "Hold": 1, "Sell": 1, "Overweight": 1}
    assert every.hold_rate == pytest.approx(2 / 6) and every.benchmark == "SPY"
    # directional: AAA Buy +0.09 hit, AAA Sell -0.21 hit, BBB Underweight +0.03 miss
    assert every.hit_rate == pytest.approx(2 / 3)
    by = {r.rating.value: r for r in every.by_rating}
    assert list(by) == ["Buy", "Overweight", "Hold", "Underweight", "Sell"]
    assert (by["Overweight"].decisions, by["Overweight"].resolved,
            by["Overweight"].hit_rate) == (1, 0, None)
    # Hold is right when |alpha| < 1%: AAA -0.06 miss, BBB -0.008 hit
    assert by["Hold"].hit_rate == 0.5 and by["Hold"].mean_alpha == pytest.approx(-0.034)
    assert by["Underweight"].mean_alpha == pytest.approx(0.03) and by["Underweight"].hit_rate == 0
    assert every.mean_alpha_long == pytest.approx(0.09)
    assert every.mean_alpha_short == pytest.approx((0.03 - 0.21) / 2)


def test_nothing_resolved_gives_no_returns_and_no_decisions_gives_no_rows():
    pending = [_x("AAA", 1, "Buy", None)]
    (row, every) = scorecard(pending)
    assert (row.decisions, row.resolved, row.policy_return, row.hit_rate) == (1, 0, None, None)
    assert every.policy_return is None and scorecard([]) == []


def test_backtest_stream_folds_to_its_plan_and_started_runs():
    config = RunConfig(ticker="AAA", trade_date=D(2024, 3, 1))
    other = config.model_copy(update={"ticker": "BBB"})
    bt = "backtest-2024-03-01-abc"
    payloads = [d.BacktestRequested(backtest_id=bt, configs=[config, other],
                                    dates=[D(2024, 3, 1), D(2024, 3, 8)], bearish="flat"),
                d.BacktestRunStarted(run_id="AAA-1", ticker="AAA", trade_date=D(2024, 3, 1)),
                d.BacktestRunStarted(run_id="AAA-dup", ticker="AAA", trade_date=D(2024, 3, 1))]
    store = InMemoryEventStore()
    store.append(bt, [NewEvent(p, "cli") for p in payloads])
    state = project_backtest(store.read_stream(bt))
    assert state.backtest_id == bt and state.completed is None
    assert state.plan == [(D(2024, 3, 1), "AAA"), (D(2024, 3, 1), "BBB"),
                          (D(2024, 3, 8), "AAA"), (D(2024, 3, 8), "BBB")]
    assert state.started == {("AAA", D(2024, 3, 1)): "AAA-1"}  # the first record wins
    assert state.config_for("BBB", D(2024, 3, 8)) == other.model_copy(
        update={"trade_date": D(2024, 3, 8)})


def test_progress_line_estimates_the_time_left():
    assert eta_line("bt", 3, 8, 0, 5.0) == "backtest bt: 3/8 runs (38%) · 5s elapsed · ETA ?"
    assert eta_line("bt", 4, 8, 2, 30.0).endswith("30s elapsed · ETA 1m00s")
    assert eta_line("bt", 8, 8, 8, 4000.0).endswith("1h06m elapsed · ETA 0s")


def test_chart_is_a_small_png(tmp_path):
    path = render_chart(tmp_path / "c.png", DECISIONS, bearish="short", title="test")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(data) < 250_000
