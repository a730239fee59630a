"""Fault experiments on a simulated multi-node Ray cluster (``ray.cluster_utils.Cluster``).

Run as ``python -m tests.fault_harness OUT.json [scenario ...]`` in a process of its own (Ray
allows one cluster connection per process; the pytest session has its own local Ray). Each
scenario kills something real mid-run — a worker process, a node, the store actor, the
driver — and writes what happened to OUT.json for tests/test_faults.py to judge.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ["RAY_AUTH_MODE"] = "disabled"  # the test cluster and its CLI children only

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from actors import pools, runtime  # noqa: E402
from actors.prompts import SYSTEM  # noqa: E402
from actors.session import Session  # noqa: E402
from events import domain as d  # noqa: E402
from events.config import RunConfig  # noqa: E402
from events.envelope import NewEvent  # noqa: E402
from events.roles import OUTPUT_OF_ROLE  # noqa: E402

BIN = Path(sys.executable).parent
SYNTHETIC = {k: ("synthetic",) for k in ("prices", "indicators", "fundamentals", "news",
                                         "social", "identity")}
OUTPUT_TYPES = set(OUTPUT_OF_ROLE.values())
BEAR_SYSTEM_START = SYSTEM["bear"][:60]


def _config(ticker: str, latency: float = 0.15) -> RunConfig:
    import datetime as dt
    return RunConfig(ticker=ticker, trade_date=dt.date(2024, 5, 10), vendors=SYNTHETIC,
                     offline_latency_s=latency)


def _request(session: Session, run_id: str, ticker: str, latency: float = 0.15) -> None:
    session.append(run_id, [NewEvent(d.RunRequested(run_id=run_id, config=_config(
        ticker, latency)), "test")], expected_version=0, idempotency_key=f"request:{run_id}")


def _facts(session: Session, run_id: str) -> dict:
    events = session.read_stream(run_id)
    outputs = Counter(e.payload.turn_id for e in events if e.type in OUTPUT_TYPES)
    calls = [(e.payload.turn_id, e.payload.call_index) for e in events
             if e.type == "LLMCallCompleted"]
    return {"status": next((e.type for e in reversed(events)
                            if e.type in ("RunCompleted", "RunFailed")), "incomplete"),
            "gapless": [e.seq for e in events] == list(range(1, len(events) + 1)),
            "turns_with_one_output": all(n == 1 for n in outputs.values()),
            "turns": len(outputs), "llm_calls": len(calls),
            "distinct_llm_calls": len(set(calls)),
            "claims": sum(e.type == "RunDriven" for e in events),
            "failures": [e.payload.reason for e in events if e.type == "RunFailed"],
            "resumes": sum(e.type == "RunResumed" for e in events)}


def _gateway_calls() -> int:
    usage = ray.get(pools.ensure_gateway().usage.remote())
    return sum(v["calls"] for v in usage.values())


def _wait_for(session: Session, run_id: str, event_type: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.type == event_type for e in session.read_stream(run_id)):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{run_id}: no {event_type} within {timeout}s")


def _drive_in_thread(session: Session, run_ids: list[str]) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(session.drive(run_ids)), daemon=True)
    thread.start()
    return thread, out


# ---- scenarios ------------------------------------------------------------------------------
def placement(cluster: Cluster, folder: Path) -> dict:
    with Session(folder / "placement.duckdb", cluster.address) as session:
        where = ray.get([w.where.remote() for w in session._team.workers()])
        markets = [pools.lookup(n) for n in session._team.pools.markets]
        limiter = pools.ensure_limiter()  # what every market-data replica reserves from
        waits = ray.get([limiter.reserve.remote("yfinance") for _ in range(6)])
        return {"limiter_waits": waits,"nodes": len(pools.alive_nodes()), "workers": len(where),
                "alive": pools.alive_nodes(), "where": [w["node"] for w in where],
                "worker_nodes": len({w["node"] for w in where}), "markets": len(markets)}


def worker_killed(cluster: Cluster, folder: Path) -> dict:
    with Session(folder / "worker.duckdb", cluster.address) as session:
        run_id = "kill-worker"
        _request(session, run_id, "NVDA")
        before = _gateway_calls()
        thread, out = _drive_in_thread(session, [run_id])
        _wait_for(session, run_id, "AnalystReportSubmitted")
        victim = session._team.worker_for(run_id)
        info = ray.get(victim.where.remote())
        os.kill(info["pid"], signal.SIGKILL)
        thread.join(180)
        after = ray.get(victim.where.remote())
        facts = _facts(session, run_id)
        return {**facts, "summary": out.get(run_id), "gateway_calls": _gateway_calls() - before,
                "restarted": after["pid"] != info["pid"]}


def node_removed(cluster: Cluster, folder: Path, nodes: list) -> dict:
    with Session(folder / "node.duckdb", cluster.address) as session:
        run_ids = [f"node-{t}" for t in ("NVDA", "AAPL", "MSFT", "AMZN", "TSLA", "META")]
        for i, run_id in enumerate(run_ids):
            _request(session, run_id, run_id.split("-")[1], latency=0.3)
            del i
        thread, out = _drive_in_thread(session, run_ids)
        _wait_for(session, run_ids[0], "AnalystReportSubmitted")
        victim = nodes[-1]
        hosted = [w for w in ray.get([w.where.remote() for w in session._team.workers()])
                  if w["node"] == victim.node_id]
        cluster.remove_node(victim)
        thread.join(240)
        return {"runs": {r: _facts(session, r) for r in run_ids},
                "summaries": out, "workers_on_removed_node": len(hosted)}


def node_joined(cluster: Cluster, folder: Path) -> dict:
    """A node that joins between batches (as in a long backtest) gets replicas and work."""
    with Session(folder / "joined.duckdb", cluster.address) as session:
        before = len(session._team.pools.workers)
        node = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        session.grow()
        where = ray.get([w.where.remote() for w in session._team.workers()])
        on_new = [w["name"] for w in where if w["node"] == node.node_id]
        run_ids = [f"joined-{t}" for t in ("NVDA", "AAPL", "MSFT", "AMZN", "TSLA")]
        names = session._team.pools.workers  # one more run, whose id hashes to the new one
        run_ids.append(next(f"joined-META{i}" for i in range(1000) if on_new and pools.
                            replica_for(f"joined-META{i}", names) == on_new[0]))
        for run_id in run_ids:
            _request(session, run_id, run_id.split("-")[1][:4], latency=0.05)
        summaries = session.drive(run_ids)
        drivers = {s["driver"].partition("/")[0] for s in summaries.values()}
        return {"workers_before": before, "workers_after": len(where),
                "on_new_node": on_new, "new_node_drove": bool(set(on_new) & drivers),
                "completed": sum(s["status"] == "completed" for s in summaries.values())}


def store_killed(cluster: Cluster, folder: Path) -> dict:
    with Session(folder / "store.duckdb", cluster.address) as session:
        run_ids = ["store-NVDA", "store-AAPL"]
        for run_id in run_ids:
            _request(session, run_id, run_id.split("-")[1], latency=0.2)
        thread, out = _drive_in_thread(session, run_ids)
        _wait_for(session, run_ids[0], "AnalystReportSubmitted")
        store = pools.lookup(pools.STORE)
        pid = ray.get(store.pid.remote())
        os.kill(pid, signal.SIGKILL)
        thread.join(240)
        results = ray.get(session._team.store.verify_all.remote())
        return {"runs": {r: _facts(session, r) for r in run_ids}, "summaries": out,
                "verify_ok": results.ok,
                "restarted": ray.get(store.pid.remote()) != pid}


def _cli(address: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "ta-actors"), *args, "--address", address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ}, start_new_session=True)


def driver_killed(cluster: Cluster, folder: Path) -> dict:
    path = folder / "driver.duckdb"
    # 1 s per call: ~10 s of run left after the first report, so a resume that starts on a
    # busy machine (seconds to join Ray) still finds the run being driven
    proc = _cli(cluster.address, "run", "NVDA", "--date", "2024-05-10", "--offline",
                "--latency", "1.0", "--store", str(path), "--json")
    with Session(path, cluster.address) as session:
        run_id = None
        deadline = time.monotonic() + 120
        while run_id is None and time.monotonic() < deadline:
            streams = ray.get(session._team.store.list_streams.remote())
            run_id = next((s.stream for s in streams if s.stream.startswith("NVDA")), None)
            time.sleep(0.1)
        _wait_for(session, run_id, "AnalystReportSubmitted", 120)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver dies; its drive call stays alive
        proc.wait()
        resumed = _cli(cluster.address, "resume", run_id, "--store", str(path), "--json")
        stdout, stderr = resumed.communicate(timeout=180)
        return {**_facts(session, run_id), "resume_rc": resumed.returncode,
                "resume_stderr": stderr.strip().splitlines()[-3:],
                "resume_json": json.loads(stdout) if resumed.returncode in (0, 1) and stdout
                else None}


def two_resumes(cluster: Cluster, folder: Path) -> dict:
    path = folder / "resumes.duckdb"
    with Session(path, cluster.address) as session:
        run_id = "orphan-NVDA"
        _request(session, run_id, "NVDA", latency=0.2)
        # an orphan: claimed by a driver that no longer exists (as after a crash)
        session.append(run_id, [NewEvent(d.RunDriven(owner="worker-7/gone"), "test")],
                       expected_version=1)
        a = _cli(cluster.address, "resume", run_id, "--store", str(path), "--no-follow",
                 "--json")
        b = _cli(cluster.address, "resume", run_id, "--store", str(path), "--no-follow",
                 "--json")
        outs = [p.communicate(timeout=180) for p in (a, b)]
        return {**_facts(session, run_id), "rcs": sorted([a.returncode, b.returncode]),
                "stderr": [err.strip().splitlines()[-3:] for _, err in outs]}


def provider_fails_one_role(cluster: Cluster, folder: Path) -> dict:
    """An endpoint that fails every attempt for the bear's calls: that run ends RunFailed
    naming the role and the reason; another run of the batch completes."""
    import datetime as dt

    from tests.fake_openai_server import FakeOpenAIServer, error

    class FailsTheBear(FakeOpenAIServer):
        def _choose(self, body: dict) -> dict:
            system = str(body.get("messages", [{}])[0].get("content", ""))
            if system.startswith(BEAR_SYSTEM_START):
                return error(500, "bear backend down")
            return super()._choose(body)

    with FailsTheBear() as server, Session(folder / "provider.duckdb", cluster.address) as session:
        real = RunConfig(ticker="NVDA", trade_date=dt.date(2024, 5, 10), vendors=SYNTHETIC,
                         quick_model="openai/fake-quick", deep_model="openai/fake-deep",
                         base_url=server.url, llm_max_retries=1)
        session.append("bear-fails", [NewEvent(d.RunRequested(run_id="bear-fails",
                                                               config=real), "test")],
                       expected_version=0, idempotency_key="request:bear-fails")
        _request(session, "offline-ok", "AAPL", latency=0.05)
        summaries = session.drive(["bear-fails", "offline-ok"])
        failed = [e.payload for e in session.read_stream("bear-fails") if e.type == "RunFailed"]
        return {"summaries": summaries, "failure": failed[0].model_dump() if failed else None,
                "bear_requests": sum(str(b.get("messages", [{}])[0].get("content", ""))
                                     .startswith(BEAR_SYSTEM_START) for b in server.requests)}


SCENARIOS = ("placement", "worker_killed", "store_killed", "two_resumes", "driver_killed",
             "node_removed", "node_joined", "provider_fails_one_role")


def main() -> None:
    out_path, wanted = Path(sys.argv[1]), sys.argv[2:] or list(SCENARIOS)
    folder = Path(tempfile.mkdtemp(prefix="ta-faults-"))
    os.environ["TA_ACTORS_CACHE"] = str(folder / "cache.duckdb")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    runtime.start(cluster.address)
    results: dict = {}
    for name in wanted:
        started = time.monotonic()
        try:
            fn = globals()[name]
            results[name] = fn(cluster, folder, nodes) if name == "node_removed" else fn(
                cluster, folder)
        except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        results[name]["seconds"] = round(time.monotonic() - started, 1)
        out_path.write_text(json.dumps(results, indent=2, default=str))
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main()
