"""A backtest: its own stream (plan, runs started, scorecard), stopped by a run budget and a
crash between two appends, then resumed without repeating a run; every decision's outcome
and the policy's scorecard recomputed by hand from the real prices."""
from __future__ import annotations

import datetime as dt
import json

import pandas as pd

from events import domain as d
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent
from projections.memory import MEMORY_STREAM

DATES = ["2024-03-01", "2024-03-08", "2024-03-15", "2024-03-22"]
POSITION = {"Buy": 1, "Overweight": 1, "Hold": 0, "Underweight": -1, "Sell": -1}


def _closes(ohlcv_dir, symbol):
    return pd.read_csv(ohlcv_dir / f"{symbol}.csv", parse_dates=["Date"]).set_index("Date")["Close"]


def _period(prices, day, k=5):
    """Return over the k trading days from ``day``'s close (the first close on or after it)."""
    window = prices.loc[day:]
    return window.iloc[k] / window.iloc[0] - 1


def _stream_lengths(store_path, run_ids):
    with DuckDBEventStore(store_path, read_only=True) as store:
        return {rid: len(store.read_stream(rid)) for rid in run_ids}


def test_backtest_stream_resumes_without_repeating_runs_and_scores_by_hand(
        cli, store_path, ohlcv_dir, tmp_path):
    args = ("--data-dir", str(ohlcv_dir), "--analysts", "market", "--store", store_path)
    first = cli("run", "NVDA", "MSFT", "--date", DATES[0], "--to", DATES[-1], "--every", "5",
                "--max-runs", "3", *args, "--json")
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    backtest_id = doc["backtest_id"]
    assert backtest_id.startswith("backtest-") and doc["status"] == "incomplete"
    assert doc["scorecard"] == [] and "ta-actors resume " + backtest_id in first.stderr
    assert "ETA" not in first.stderr  # --json: no progress line
    done_before = {r["run_id"]: r for r in doc["runs"]}
    assert len(done_before) == 3 and all(r["status"] == "completed" for r in doc["runs"])
    lengths_before = _stream_lengths(store_path, done_before)

    # two crashes: one between the backtest's record of a run and the run's own first event,
    # one after the run was requested but before any driver took it
    crashed, requested_only = "NVDA-2024-03-15-0000dead", "MSFT-2024-03-15-0000beef"
    with DuckDBEventStore(store_path) as store:
        plan = store.read_stream(backtest_id)[0].payload
        msft = next(c for c in plan.configs if c.ticker == "MSFT")
        store.append(backtest_id, [NewEvent(d.BacktestRunStarted(
            run_id=run_id, ticker=run_id[:4], trade_date=dt.date(2024, 3, 15)), "cli")
            for run_id in (crashed, requested_only)])
        store.append(requested_only, [NewEvent(d.RunRequested(
            run_id=requested_only, config=msft.model_copy(
                update={"trade_date": dt.date(2024, 3, 15)})), "cli")], expected_version=0)

    second = cli("resume", backtest_id, "--store", store_path)
    assert second.exit_code == 0, second.output
    # not a terminal: one progress line per date, with the runs ended and an ETA
    lines = [line for line in second.stderr.splitlines() if line.startswith("backtest ")]
    assert len(lines) == 4 and all(" ETA " in line for line in lines)
    assert lines[-1].startswith(f"backtest {backtest_id}: 8/8 runs (100%)")
    assert lines[-1].endswith("ETA 0s · date 4/4 2024-03-22 done")
    assert "backtest scorecard" in second.stdout and "completed; report" in second.stdout
    # the recorded backtest, read back (the scorecard recomputed from the store)
    again = cli("resume", backtest_id, "--store", store_path, "--json")
    assert again.exit_code == 0 and "already completed" in again.stderr
    doc = json.loads(again.stdout)
    assert doc["status"] == "completed" and doc["backtest_id"] == backtest_id
    runs = doc["runs"]
    assert sorted({r["trade_date"] for r in runs}) == DATES and len(runs) == 8
    assert all(r["status"] == "completed" for r in runs)
    # no run repeated: the three finished runs untouched, the crashed one finished, one run
    # per (ticker, date) in the whole store
    assert _stream_lengths(store_path, done_before) == lengths_before
    assert {crashed, requested_only} <= {r["run_id"] for r in runs}
    with DuckDBEventStore(store_path, read_only=True) as store:
        requested = [(e.payload.config.ticker, e.payload.config.trade_date)
                     for e in store.read_all() if e.type == "RunRequested"]
        resumed = [e.stream for e in store.read_all() if e.type == "RunResumed"]
        outcomes = [e.payload for e in store.read_stream(MEMORY_STREAM)
                    if e.type == "OutcomeResolved"]
        stream = store.read_stream(backtest_id)
    assert len(requested) == len(set(requested)) == 8 and resumed == [requested_only]
    assert [e.type for e in stream].count("BacktestRunStarted") == 8
    assert stream[-1].type == "BacktestCompleted" and len(outcomes) == 8
    assert [row.model_dump(mode="json") for row in stream[-1].payload.scorecard] == \
        doc["scorecard"]

    # per-decision outcomes, recomputed from the CSVs (fractions)
    spy = _closes(ohlcv_dir, "SPY")
    prices = {t: _closes(ohlcv_dir, t) for t in ("NVDA", "MSFT")}
    decisions = doc["decisions"]
    assert len(decisions) == 8
    for x in decisions:
        raw = _period(prices[x["ticker"]], x["trade_date"])
        start = prices[x["ticker"]].loc[x["trade_date"]:].index[0]
        end = prices[x["ticker"]].loc[x["trade_date"]:].index[5]
        bench = spy.loc[end] / spy.loc[start] - 1
        assert abs(x["raw_return"] - raw) < 1e-9 and abs(x["alpha"] - (raw - bench)) < 1e-9
        assert (x["benchmark"], x["holding_days"]) == ("SPY", 5) and x["rating"] in POSITION

    # the policy and the Hold rate, by hand: long Buy/Overweight, flat Hold, short the rest
    card = {row["ticker"]: row for row in doc["scorecard"]}
    assert list(card) == ["NVDA", "MSFT", "ALL"]
    ends = {}
    for ticker in ("NVDA", "MSFT"):
        mine = [x for x in decisions if x["ticker"] == ticker]
        policy = hold = bench = 1.0
        for x in mine:
            raw = _period(prices[ticker], x["trade_date"])
            policy *= 1 + POSITION[x["rating"]] * raw
            hold *= 1 + raw
            bench *= 1 + _period(spy, x["trade_date"])
        ends[ticker] = policy
        row = card[ticker]
        assert abs(row["policy_return"] - (policy - 1)) < 1e-9
        assert abs(row["buy_hold_return"] - (hold - 1)) < 1e-9
        assert abs(row["benchmark_return"] - (bench - 1)) < 1e-9
        holds = sum(x["rating"] == "Hold" for x in mine)
        assert row["hold_rate"] == holds / 4 and row["decisions"] == 4
        assert abs(row["mean_raw_return"] - sum(_period(prices[ticker], day)
                                                for day in DATES) / 4) < 1e-9
    every = card["ALL"]
    assert abs(every["policy_return"] - (sum(ends.values()) / 2 - 1)) < 1e-9
    assert every["hold_rate"] == sum(x["rating"] == "Hold" for x in decisions) / 8
    directional = [x for x in decisions if x["rating"] != "Hold"]
    hits = sum((POSITION[x["rating"]] > 0) == (x["alpha"] > 0) for x in directional)
    assert abs(every["hit_rate"] - hits / len(directional)) < 1e-9
    by_rating = {r["rating"]: r for r in every["by_rating"]}
    assert sum(r["decisions"] for r in by_rating.values()) == 8
    buys = [x["alpha"] for x in decisions if x["rating"] == "Buy"]
    assert by_rating["Buy"]["decisions"] == len(buys)
    if buys:
        assert abs(by_rating["Buy"]["mean_alpha"] - sum(buys) / len(buys)) < 1e-9

    # the chart and the write-up; replay and report read the backtest's own stream
    chart = tmp_path / "chart.png"
    with open(doc["chart"], "rb") as png:
        chart.write_bytes(png.read())
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size < 250_000
    replay = cli("replay", backtest_id, "--store", store_path)
    assert replay.exit_code == 0, replay.output
    assert "BacktestCompleted" in replay.stdout and "hash chain: intact" in replay.stdout
    assert "runs: 8 of 8 started, 8 ended; their chains: intact" in replay.stdout
    audit = json.loads(cli("replay", backtest_id, "--store", store_path, "--json").stdout)
    assert audit["verified"] and len(audit["runs"]) == 8
    report = cli("report", backtest_id, "--store", store_path, "--out", tmp_path / "rep")
    assert report.exit_code == 0, report.output
    text = (tmp_path / "rep" / "backtest.md").read_text()
    assert f"{every['policy_return']:+.2%}" in text and "## Decisions" in text
    assert (tmp_path / "rep" / "backtest.png").exists()

    stats = json.loads(cli("stats", "--by", "role", "--store", store_path, "--json").stdout)
    by_role = {row["key"]: row for row in stats}
    assert by_role["portfolio_manager"]["calls"] == 8 and by_role["reflector"]["calls"] == 8
    assert all(row["failed"] == 0 for row in stats)


def test_backtest_refuses_bad_input_before_writing(cli, store_path):
    bad = cli("run", "NVDA", "--date", "2024-03-22", "--to", "2024-03-01", "--store", store_path)
    assert bad.exit_code == 2 and "is before --date" in bad.stderr
    bad = cli("run", "NVDA", "--date", "2024-03-01", "--to", "2024-03-22", "--bearish",
              "sideways", "--offline", "--store", store_path)
    assert bad.exit_code == 2 and "--bearish must be one of short, flat" in bad.stderr
    assert not store_path.exists()
    missing = cli("resume", "backtest-2024-03-01-00000000", "--store", store_path)
    assert missing.exit_code == 2 and "no event store" in missing.stderr
    for option in (["--max-runs", "3"], ["--every", "2"], ["--bearish", "flat"]):
        alone = cli("run", "NVDA", "--date", "2024-03-01", "--offline", *option,
                    "--store", store_path)
        assert alone.exit_code == 2 and "backtest options: give the last trade date with --to" \
            in alone.stderr, (option, alone.stderr)
    budget = cli("resume", "backtest-2024-03-01-00000000", "--token-budget", "1000",
                 "--store", store_path)
    assert budget.exit_code == 2 and "keep the settings it was started with" in budget.stderr
    assert not store_path.exists()
