"""`runs`, `memory show`, `stats` and `rebuild` read the read models of a real small store
(offline model, real prices), and answer what the folds over the events answer."""
from __future__ import annotations

import dataclasses
import json

import duckdb
import pytest

from events import domain as d
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent
from projections.memory import MEMORY_TYPES, memory_entries
from projections.runs import RUN_SUMMARY_TYPES, summarize_runs
from projections.usage import USAGE_TYPES, usage
from projections.views import VIEWS


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, ray_team, ohlcv_dir):
    """Three runs: AAPL and MSFT on one date, AAPL a week later (which scores the first)."""
    from typer.testing import CliRunner

    from cli.app import app
    path = tmp_path_factory.mktemp("views-cli") / "events.duckdb"
    runner = CliRunner()
    ids = []
    for args in (("AAPL", "MSFT", "--date", "2024-01-05"), ("AAPL", "--date", "2024-01-12")):
        result = runner.invoke(app, ["run", *args, "--analysts", "market", "--data-dir",
                                     str(ohlcv_dir), "--store", str(path), "--json"],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.output
        ids += [r["run_id"] for r in json.loads(result.stdout)]
    return path, ids


def runs_json(cli, path, *args):
    result = cli("runs", "--store", path, "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_runs_newest_first_with_limit_ticker_and_status(cli, small_store):
    path, ids = small_store
    listed = runs_json(cli, path)
    assert [r["run_id"] for r in listed] == ids[::-1]
    with DuckDBEventStore(path, read_only=True) as store:
        folded = summarize_runs(store.read_all(types=list(RUN_SUMMARY_TYPES)))
    assert [(r["run_id"], r["status"], r["trade_date"], r["rating"], r["started_at"],
             r["updated_at"]) for r in listed] == [
        (s.run_id, s.status, str(s.trade_date), s.rating, str(s.started_at), str(s.updated_at))
        for s in folded[::-1]]
    assert all(r["calls"] > 0 and r["quick_model"] == "offline/quick" for r in listed)
    assert [r["run_id"] for r in runs_json(cli, path, "--limit", "1")] == [ids[-1]]
    assert [r["ticker"] for r in runs_json(cli, path, "--ticker", "aapl")] == ["AAPL", "AAPL"]
    assert [r["run_id"] for r in runs_json(cli, path, "--ticker", "MSFT")] == [ids[1]]
    assert len(runs_json(cli, path, "--status", "completed")) == 3
    assert runs_json(cli, path, "--status", "failed") == []
    bad = cli("runs", "--store", path, "--status", "done")
    assert bad.exit_code == 2 and "unknown status 'done'" in bad.stderr
    table = cli("runs", "--store", path, "--limit", "2").stdout
    assert ids[-1] in table and ids[0] not in table


def test_memory_show_reads_the_memory_table(cli, small_store):
    path, ids = small_store
    shown = json.loads(cli("memory", "show", "--store", path, "--ticker", "aapl", "--json").stdout)
    with DuckDBEventStore(path, read_only=True) as store:
        entries = memory_entries(store.read_all(types=list(MEMORY_TYPES)))
    aapl = [m for m in entries if m.ticker == "AAPL"]
    assert [(m["run_id"], m["resolved"], m["alpha"]) for m in shown] == [
        (m.run_id, m.resolved, m.outcome.alpha if m.outcome else None) for m in aapl]
    assert shown[0]["run_id"] == ids[0] and shown[0]["resolved"] and not shown[1]["resolved"]
    assert shown[0]["resolved_on"] == str(aapl[0].outcome.resolved_on)
    everything = json.loads(cli("memory", "show", "--store", path, "--json").stdout)
    assert [m["run_id"] for m in everything] == [m.run_id for m in entries]
    text = cli("memory", "show", "--store", path, "--ticker", "MSFT").stdout
    assert "MSFT" in text and "AAPL" not in text


@pytest.mark.parametrize("by", ["model", "provider", "role", "day", "run"])
def test_stats_aggregates_in_sql_what_the_fold_counts(cli, small_store, by):
    path, _ = small_store
    rows = json.loads(cli("stats", "--by", by, "--store", path, "--json").stdout)
    with DuckDBEventStore(path, read_only=True) as store:
        folded = usage(store.read_all(types=list(USAGE_TYPES)), by)
    assert [{k: v for k, v in r.items() if k not in ("cost_usd", "mean_latency_ms",
                                                      "latency_ms", "grounding")}
            for r in rows] == [
        {k: v for k, v in dataclasses.asdict(u).items() if k not in ("cost_usd", "latency_ms")}
        for u in folded]
    assert [r["latency_ms"] for r in rows] == pytest.approx([u.latency_ms for u in folded])
    assert rows and sum(r["calls"] for r in rows) == sum(u.calls for u in folded) > 10


def test_rebuild_and_catching_up_after_writes_behind_the_views(cli, small_store, tmp_path):
    path, ids = small_store
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(path.read_bytes())
    before = runs_json(cli, copy, "--limit", "0")
    # events appended by code that does not keep the views (an older version, a crash)
    with DuckDBEventStore(copy) as store:
        config = store.read_stream(ids[0])[0].payload.config
        store.append("r-late", [NewEvent(d.RunRequested(run_id="r-late", config=config), "cli")])
    late = runs_json(cli, copy, "--status", "incomplete")
    assert [r["run_id"] for r in late] == ["r-late"]
    # a deleted read model is a cache: it comes back
    con = duckdb.connect(str(copy))
    con.execute("DROP TABLE view_memory")
    con.execute("DELETE FROM view_runs")  # and a damaged one is fixed by `rebuild`
    con.close()
    assert len(json.loads(cli("memory", "show", "--store", copy, "--json").stdout)) == 3
    assert runs_json(cli, copy) == []
    result = cli("rebuild", "--store", copy, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    with DuckDBEventStore(copy, read_only=True) as store:
        wanted = {e for v in VIEWS for e in v.types}
        assert doc["events"] == len(store.read_all(types=sorted(wanted)))
    assert doc["rows"]["view_runs"] == 4 and doc["rows"]["view_memory"] == 4
    after = runs_json(cli, copy, "--limit", "0")
    assert after[1:] == before and after[0]["run_id"] == "r-late"
    text = cli("rebuild", "--store", copy).stdout
    assert "runs 4 rows" in text and "memory 4 rows" in text


def test_the_store_actor_answers_the_coordinators_queries(ray_team, small_store):
    import datetime as dt

    import ray

    from actors import runtime
    from projections.memory import past_context
    from projections.views import entries_from_rows
    path, ids = small_store
    team = ray_team(path)
    try:
        day = dt.date(2024, 1, 20)
        rows = ray.get(team.store.query.remote("past_context", {"ticker": "AAPL",
                                                                "trade_date": day}))
        pending = ray.get(team.store.query.remote("pending", {"ticker": "AAPL", "before": day}))
        listed = ray.get(team.store.query.remote("runs", {"ticker": None, "status": None,
                                                          "limit": 1}))
    finally:
        runtime.release_store(team.store)
    with DuckDBEventStore(path, read_only=True) as store:
        entries = memory_entries(store.read_all())
    assert [r["run_id"] for r in rows] == [ids[0]]  # resolved on 2024-01-12
    assert past_context(entries_from_rows(rows), "AAPL", day) == past_context(entries, "AAPL",
                                                                              day)
    assert [r["run_id"] for r in pending] == [ids[2]] and listed[0]["run_id"] == ids[2]
