"""Resume and fork refuse a run whose stored history fails its hash chain, naming the first
bad event, and write nothing: continuing would seal the altered history for good."""
from __future__ import annotations

import json

import duckdb


def _tamper(store_path, run_id: str) -> int:
    """Edit one recorded tool call's latency, as a hand-edit would; returns its seq."""
    con = duckdb.connect(str(store_path))
    try:
        seq, payload = con.execute(
            "SELECT seq, payload FROM events WHERE stream = ? AND type = 'ToolCallCompleted' "
            "ORDER BY seq LIMIT 1", [run_id]).fetchone()
        data = json.loads(payload)
        data["latency_ms"] = data["latency_ms"] + 1.0
        con.execute("UPDATE events SET payload = ? WHERE stream = ? AND seq = ?",
                    [json.dumps(data, separators=(",", ":")), run_id, seq])
    finally:
        con.close()
    return seq


def _count(store_path) -> int:
    con = duckdb.connect(str(store_path), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        con.close()


def test_resume_and_fork_refuse_a_tampered_run(cli, store_path):
    ran = cli("run", "NVDA", "--date", "2024-05-10", "--offline", "--store", store_path,
              "--json")
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.stdout)[0]["run_id"]
    seq = _tamper(store_path, run_id)
    before = _count(store_path)
    for args in (("resume", run_id), ("fork", run_id, "--at", "portfolio_manager")):
        result = cli(*args, "--store", store_path)
        assert result.exit_code == 1, result.output
        line = result.stderr.strip()
        assert "fails its hash chain" in line and f"seq {seq} " in line and "\n" not in line
    assert _count(store_path) == before  # nothing written


def test_resume_of_an_intact_completed_run_says_so(cli, store_path):
    ran = cli("run", "NVDA", "--date", "2024-05-10", "--offline", "--store", store_path,
              "--json")
    run_id = json.loads(ran.stdout)[0]["run_id"]
    result = cli("resume", run_id, "--store", store_path, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)[0]["status"] == "completed"
