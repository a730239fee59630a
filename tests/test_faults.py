"""Faults on a simulated 3-node cluster: each test judges one experiment of
tests/fault_harness.py, which kills something real mid-run (a worker process, a node, the
store actor, the driver) in a process of its own, with its own Ray cluster."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def faults(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("faults") / "faults.json"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.run([sys.executable, "-m", "tests.fault_harness", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=900)
    if not out.exists():
        pytest.fail(f"fault harness wrote nothing (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(out.read_text())


def _clean(facts: dict) -> None:
    assert "error" not in facts, facts.get("error")
    assert facts["status"] == "RunCompleted", facts
    assert facts["gapless"] and facts["turns_with_one_output"] and facts["turns"] == 12
    assert facts["distinct_llm_calls"] == facts["llm_calls"]  # no call recorded twice
    assert not facts["failures"]


def test_pools_put_one_worker_on_every_node(faults):
    p = faults["placement"]
    assert "error" not in p, p.get("error")
    assert p["nodes"] == p["workers"] == p["markets"] == 3
    assert sorted(p["where"]) == sorted(p["alive"])  # every node hosts a replica
    # one limiter for the cluster: yfinance's burst of 4, then one call every half second
    # (a wait is shorter by the time its reservation itself waited for a busy machine)
    waits = sorted(p["limiter_waits"])  # reservations run concurrently, in any order
    assert waits[:4] == [0.0] * 4
    assert 0.25 < waits[4] <= 0.55 and 0.75 < waits[5] <= 1.05 and waits[5] - waits[4] > 0.4


def test_a_killed_worker_is_restarted_and_its_run_completes(faults):
    f = faults["worker_killed"]
    _clean(f)
    assert f["restarted"] and f["claims"] == 2  # the new incarnation took the run over
    # the gateway answered at most the calls in flight at the kill (4 analysts) beyond
    # those recorded: no recorded call was made again
    assert f["llm_calls"] <= f["gateway_calls"] <= f["llm_calls"] + 4


def test_runs_of_a_removed_node_complete_on_the_others(faults):
    f = faults["node_removed"]
    assert "error" not in f, f.get("error")
    assert f["workers_on_removed_node"] >= 1
    for facts in f["runs"].values():
        _clean(facts)
    assert all(s["status"] == "completed" for s in f["summaries"].values())


def test_a_killed_store_actor_restarts_and_nothing_is_lost(faults):
    f = faults["store_killed"]
    assert "error" not in f, f.get("error")
    assert f["restarted"] and f["verify_ok"]
    for facts in f["runs"].values():
        _clean(facts)


def test_resume_after_the_driver_died_follows_the_live_run_to_its_end(faults):
    f = faults["driver_killed"]
    _clean(f)
    assert f["resume_rc"] == 0 and f["resume_json"][0]["status"] == "completed"
    assert f["claims"] == 1  # the coordinator kept driving; resume never took it over
    assert any("being driven by" in line for line in f["resume_stderr"])


def test_two_resumes_at_once_one_drives_the_other_stops(faults):
    f = faults["two_resumes"]
    _clean(f)
    assert f["rcs"] == [0, 1]
    assert f["claims"] == 2 and f["resumes"] == 1  # the orphan's claim, then exactly one
    assert any("being driven by" in " ".join(lines) for lines in f["stderr"])


def test_a_node_that_joins_gets_replicas_and_runs(faults):
    f = faults["node_joined"]
    assert "error" not in f, f.get("error")
    assert f["workers_after"] == f["workers_before"] + 1 and len(f["on_new_node"]) == 1
    assert f["completed"] == 6 and f["new_node_drove"]


def test_a_provider_failing_one_role_fails_that_run_and_not_the_batch(faults):
    f = faults["provider_fails_one_role"]
    assert "error" not in f, f.get("error")
    failure = f["failure"]
    assert failure["kind"] == "llm" and failure["role"] == "bear" and "500" in failure["reason"]
    assert f["bear_requests"] == 2  # one try and its one retry, then the run ends
    assert f["summaries"]["bear-fails"]["status"] == "failed"
    assert f["summaries"]["offline-ok"]["status"] == "completed"
