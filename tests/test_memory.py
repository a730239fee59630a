"""Past decisions scored against what the market did next, reflected on, and fed back —
only once the outcome was knowable on the later run's trade date."""
from __future__ import annotations

import datetime as dt
import json

import pandas as pd

from events.duckdb_store import DuckDBEventStore
from projections.memory import MEMORY_STREAM


def _run(cli, store_path, ohlcv_dir, day):
    result = cli("run", "AAPL", "--date", day, "--data-dir", ohlcv_dir, "--store", store_path,
                 "--analysts", "market", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)[0]


def _past_context(store_path, run_id):
    with DuckDBEventStore(store_path, read_only=True) as store:
        return next(e.payload for e in store.read_stream(run_id)
                    if e.type == "PastContextLoaded")


def test_outcomes_resolve_and_feed_later_decisions_without_look_ahead(cli, store_path, ohlcv_dir,
                                                                     tmp_path):
    first = _run(cli, store_path, ohlcv_dir, "2024-01-05")
    assert _past_context(store_path, first["run_id"]).entries == 0
    # two trading days later the first outcome (5 trading days) is not knowable yet
    soon = _run(cli, store_path, ohlcv_dir, "2024-01-09")
    assert _past_context(store_path, soon["run_id"]).entries == 0
    later = _run(cli, store_path, ohlcv_dir, "2024-02-01")
    context = _past_context(store_path, later["run_id"])
    assert context.entries == 2
    assert f"[2024-01-05 | AAPL | {first['rating']} |" in context.text
    assert "REFLECTION:" in context.text

    with DuckDBEventStore(store_path, read_only=True) as store:
        memory = store.read_stream(MEMORY_STREAM)
    outcome = next(e.payload for e in memory if e.type == "OutcomeResolved"
                   and e.payload.run_id == first["run_id"])
    prices = pd.read_csv(ohlcv_dir / "AAPL.csv", parse_dates=["Date"]).set_index("Date")["Close"]
    spy = pd.read_csv(ohlcv_dir / "SPY.csv", parse_dates=["Date"]).set_index("Date")["Close"]
    window = prices.loc["2024-01-05":"2024-01-17"]
    raw = window.iloc[5] / window.iloc[0] - 1
    bench = spy.loc[window.index[5]] / spy.loc[window.index[0]] - 1
    assert outcome.holding_days == 5 and outcome.benchmark == "SPY"
    assert abs(outcome.raw_return - raw) < 1e-9 and abs(outcome.alpha - (raw - bench)) < 1e-9
    assert outcome.resolved_on == window.index[5].date() == dt.date(2024, 1, 12)
    reflections = [e for e in memory if e.type == "ReflectionRecorded"]
    assert {e.payload.run_id for e in reflections} == {first["run_id"], soon["run_id"]}
    # each lesson judges the rating that was given (the prompt states it and the thesis)
    rating_of = {first["run_id"]: first["rating"], soon["run_id"]: soon["rating"]}
    for e in reflections:
        assert f"The {rating_of[e.payload.run_id]} call on AAPL" in e.payload.reflection
    prompts = [m.content for e in memory if e.type == "LLMCallCompleted"
               for m in e.payload.messages if m.role == "user"]
    assert f"\nRating: {first['rating']}\nThesis: " in prompts[0]

    shown = json.loads(cli("memory", "show", "--store", store_path, "--json").stdout)
    assert [(m["trade_date"], m["resolved"]) for m in shown] == [
        ("2024-01-05", True), ("2024-01-09", True), ("2024-02-01", False)]
    text = cli("memory", "show", "--store", store_path, "--ticker", "aapl").stdout
    assert "<!-- ENTRY_END -->" in text and "pending]" in text

    exported = tmp_path / "memory.md"
    result = cli("memory", "export", exported, "--store", store_path)
    assert result.exit_code == 0 and "wrote 3 decisions" in result.stdout
    markdown = exported.read_text()
    assert markdown.startswith("# Memory log\n\n3 decisions, 2 resolved.")
    assert f"| 2024-01-05 | AAPL | {first['rating']} | {raw:+.2%} |" in markdown
    assert markdown.count("### Reflection") == 3 and f"`{later['run_id']}`" in markdown
    bad = cli("memory", "export", tmp_path / "no" / "such" / "m.md", "--store", store_path)
    assert bad.exit_code == 2 and "cannot write" in bad.stderr
