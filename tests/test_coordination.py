"""The coordinator and role actors under Ray: refusals, retried calls, resume after a crash."""
from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter

import pytest
import ray

from events import domain as d
from events.config import RunConfig
from events.envelope import NewEvent
from events.records import Instrument
from projections.run_state import project
from projections.schedule import Turn


def _events(team, run_id):
    return ray.get(team.store.read_stream.remote(run_id))


def _request(team, run_id, **config):
    cfg = RunConfig(ticker="NVDA", trade_date=dt.date(2024, 5, 10), **config)
    ray.get(team.store.append.remote(run_id, [NewEvent(d.RunRequested(run_id=run_id, config=cfg),
                                                       "test")], 0, f"request:{run_id}"))
    return cfg


def test_out_of_turn_output_is_refused_and_not_written(ray_team, store_path, ohlcv_dir):
    team = ray_team(store_path)
    _request(team, "r-refuse", data_dir=str(ohlcv_dir), vendors={k: ("local",) for k in (
        "prices", "indicators", "fundamentals", "news", "social", "identity")})
    summary = ray.get(team.coordinator.drive.remote(team.store, "r-refuse"))
    assert summary["status"] == "completed"
    before = len(_events(team, "r-refuse"))
    late = d.DebateArgumentMade(turn_id="debate:3", speaker="bull", round=2, argument="late")
    with pytest.raises(Exception, match="refused DebateArgumentMade.*completed"):
        ray.get(team.coordinator.submit.remote(team.store, "r-refuse", late, "role:bull"))
    assert len(_events(team, "r-refuse")) == before


def test_retried_role_call_does_not_duplicate_output(ray_team, store_path):
    team = ray_team(store_path)
    cfg = _request(team, "r-retry", vendors={k: ("synthetic",) for k in (
        "prices", "indicators", "fundamentals", "news", "social", "identity")})
    context = [d.InstrumentResolved(instrument=Instrument(ticker="NVDA", symbol="NVDA")),
               d.MarketSnapshotTaken(snapshot=None, note="test"),
               d.PastContextLoaded(text="", entries=0),
               d.TurnAssigned(turn_id="analyst:market", role="market")]
    ray.get(team.store.append.remote("r-retry", [NewEvent(p, "coordinator") for p in context]))
    turn = Turn("analyst:market", "market")
    first = ray.get(team.roles["market"].act.remote(team.store, "r-retry", turn))
    version = len(_events(team, "r-retry"))
    again = ray.get(team.roles["market"].act.remote(team.store, "r-retry", turn))  # Ray retry
    assert again == first and isinstance(first, d.AnalystReportSubmitted)
    assert len(_events(team, "r-retry")) == version  # the retry replayed recorded calls
    ray.get(team.coordinator.submit.remote(team.store, "r-retry", first, "role:market"))
    with pytest.raises(Exception, match="already answered"):
        ray.get(team.coordinator.submit.remote(team.store, "r-retry", again, "role:market"))
    types = Counter(e.type for e in _events(team, "r-retry"))
    assert types["AnalystReportSubmitted"] == 1
    keys = [(e.payload.turn_id, e.payload.call_index) for e in _events(team, "r-retry")
            if e.type == "LLMCallCompleted"]
    assert len(keys) == len(set(keys)) >= 2  # tool loop: asked for tools, then wrote
    assert cfg.ticker == "NVDA"


def _wait_dead(name):
    for _ in range(100):
        try:
            ray.get_actor(name, namespace="ta-actors")
        except ValueError:
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} still alive")


def test_resume_after_coordinator_crash_repeats_no_llm_call(ray_team, store_path, cli):
    team = ray_team(store_path)
    _request(team, "r-crash", offline_latency_s=0.3, vendors={k: ("synthetic",) for k in (
        "prices", "indicators", "fundamentals", "news", "social", "identity")})
    usage_before = ray.get(team.gateway.usage.remote())
    team.coordinator.drive.remote(team.store, "r-crash")
    for _ in range(300):  # wait for the research manager's plan, then crash the coordinator
        if any(e.type == "InvestmentPlanIssued" for e in _events(team, "r-crash")):
            break
        time.sleep(0.05)
    ray.kill(team.coordinator, no_restart=True)
    _wait_dead("coordinator")
    time.sleep(1.0)  # a role call in flight may still land its LLM event; that is fine
    crashed = _events(team, "r-crash")
    assert not any(e.type in ("RunCompleted", "RunFailed") for e in crashed)
    assert project(crashed).plan is not None and project(crashed).decision is None
    calls_before = {(e.payload.turn_id, e.payload.call_index) for e in crashed
                    if e.type == "LLMCallCompleted"}
    from actors import runtime
    runtime.release_store(team.store)  # the CLI opens the file again to resume

    listed = {r["run_id"]: r["status"] for r in json.loads(
        cli("runs", "--store", store_path, "--json").stdout)}
    assert listed["r-crash"] == "incomplete"
    result = cli("resume", "r-crash", "--store", store_path, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["status"] == "completed"
    team = ray_team(store_path)
    events = _events(team, "r-crash")
    resumed_at = next(e.seq for e in events if e.type == "RunResumed")
    llm = [e for e in events if e.type == "LLMCallCompleted"]
    keys = [(e.payload.turn_id, e.payload.call_index) for e in llm]
    assert len(keys) == len(set(keys))  # no call recorded twice
    after = [e for e in llm if e.seq > resumed_at]
    assert after and not {(e.payload.turn_id, e.payload.call_index) for e in after} & calls_before
    assert {e.payload.role for e in after} <= {"trader", "aggressive", "conservative", "neutral",
                                               "portfolio_manager"}
    # the gateway made exactly the calls that were recorded: nothing was paid for twice
    usage_after = ray.get(team.gateway.usage.remote())
    made = sum(v["calls"] for v in usage_after.values()) - sum(
        v["calls"] for v in usage_before.values())
    assert made == len(llm)
    assert events[-1].type == "RunCompleted" and project(events).decision is not None
