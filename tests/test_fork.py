"""Forking: the same earlier work, decided again from a stage with other settings."""
from __future__ import annotations

import json

from events.duckdb_store import DuckDBEventStore


def test_fork_at_portfolio_manager_reuses_everything_before_it(cli, store_path, ohlcv_dir):
    first = cli("run", "AAPL", "--date", "2023-06-01", "--data-dir", ohlcv_dir,
                "--store", store_path, "--json")
    source_id = json.loads(first.stdout)[0]["run_id"]
    result = cli("fork", source_id, "--at", "portfolio_manager", "--deep-model",
                 "offline/deep-second-opinion", "--store", store_path, "--json")
    assert result.exit_code == 0, result.output
    fork_id = json.loads(result.stdout)[0]["run_id"]
    assert fork_id != source_id
    with DuckDBEventStore(store_path, read_only=True) as store:
        source, fork = store.read_stream(source_id), store.read_stream(fork_id)
        assert store.verify(fork_id).ok
    head = fork[0].payload
    assert head.forked_from == source_id and head.forked_at == "portfolio_manager"
    assert head.config.deep_model == "offline/deep-second-opinion"
    copied = [e for e in fork if e.actor == "fork"]
    kept = [e.payload for e in source if e.type not in (  # a lease is the source's own
        "RunRequested", "RunDriven", "PortfolioDecisionIssued", "RunCompleted")
        and getattr(e.payload, "turn_id", "") != "portfolio_manager"]
    assert [e.payload for e in copied] == kept  # same payloads, same order
    new_calls = [e.payload for e in fork if e.type == "LLMCallCompleted" and e.actor != "fork"]
    assert [(c.role, c.model) for c in new_calls] == [
        ("portfolio_manager", "offline/deep-second-opinion")]
    assert fork[-1].type == "RunCompleted"
    replay = json.loads(cli("replay", fork_id, "--store", store_path, "--json").stdout)
    assert replay["verified"] and replay["decision_matches"]
    stats = json.loads(cli("stats", "--by", "run", "--store", store_path, "--json").stdout)
    assert {r["key"]: r["calls"] for r in stats}[fork_id] == 1  # copies are not counted again
    bad = cli("fork", source_id, "--at", "lunch", "--store", store_path)
    assert bad.exit_code == 2 and "unknown stage 'lunch'" in bad.stderr
