"""Scale-out benchmark: many tickers at once on one node and on a simulated 3-node cluster.

    python -m bench.cluster [--latency 0.5] [--sizes 1,8,32,64] [--no-cluster]

For each size: wall time of `ta-actors run` (in-process CLI, offline model sleeping
``latency`` per call, synthetic data) and its ratio to one run's critical path (sequential
model calls x latency); peak RSS of the whole process tree (driver and every Ray process).
At zero latency it measures CPU per run by process kind (store, gateway, workers,
market data, driver) from /proc. The 3-node cluster runs in a child process (one Ray per
process) and reports how many replicas each node hosts. The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.procs import PeakSampler

REPO = Path(__file__).resolve().parents[1]
TICKERS = ("NVDA", "AAPL", "MSFT", "AMZN", "GOOGL", "META", "TSLA", "SPY", "AMD", "INTC", "ORCL",
           "IBM", "CSCO", "QCOM", "TXN", "AVGO")


WORKERS: int | None = None  # --workers for every run (default: one replica per node)


def tickers(n: int) -> list[str]:
    """n distinct synthetic tickers (the synthetic vendor knows any symbol)."""
    return [TICKERS[i] if i < len(TICKERS) else f"T{i:03d}" for i in range(n)]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cold_run(workdir: Path) -> float:
    exe = Path(sys.executable).parent / "ta-actors"
    started = time.perf_counter()
    store = workdir / f"cold-{time.monotonic_ns()}.duckdb"  # a new store: nothing warm in it
    done = subprocess.run([str(exe), "run", "NVDA", "--date", "2024-05-10", "--offline",
                           "--store", str(store), "--json"],
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"cold run failed: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - started


class Bench:
    def __init__(self, workdir: Path, address: str | None):
        from typer.testing import CliRunner

        from cli.app import app
        self.workdir, self.address = workdir, address
        self.runner, self.app, self.count = CliRunner(), app, 0

    def run(self, n: int, latency: float) -> tuple[float, float, list[dict]]:
        self.count += 1
        args = ["run", *tickers(n), "--date", "2024-05-10", "--offline", "--latency",
                str(latency), "--store", str(self.workdir / f"s{self.count}.duckdb"), "--json"]
        if self.address:
            args += ["--address", self.address]
        if WORKERS:
            args += ["--workers", str(WORKERS)]
        with PeakSampler() as sampler:
            started = time.perf_counter()
            result = self.runner.invoke(self.app, args, catch_exceptions=False)
            wall = time.perf_counter() - started
        if result.exit_code != 0:
            raise SystemExit(f"run of {n} failed: {result.output[-800:]}")
        return wall, sampler.peak, json.loads(result.stdout)


def processes() -> dict[str, list[int]]:
    """Pids of our processes by kind."""
    import ray

    from actors import pools
    from actors.session import Session  # noqa: F401 - the team is up already
    kinds: dict[str, list[int]] = {"driver": [os.getpid()]}
    kinds["store"] = [ray.get(pools.lookup(pools.STORE).pid.remote())]
    kinds["gateway"] = [ray.get(pools.lookup(pools.GATEWAY).pid.remote())]
    i, kinds["worker"], kinds["market"] = 0, [], []
    while (w := pools.lookup(pools.worker_name(i))) is not None:
        kinds["worker"].append(ray.get(w.where.remote())["pid"])
        kinds["market"].append(ray.get(pools.lookup(pools.market_name(i)).pid.remote()))
        i += 1
    return kinds


def replicas_per_node() -> dict[str, int]:
    import ray

    from actors import pools
    counts: dict[str, int] = {}
    i = 0
    while (w := pools.lookup(pools.worker_name(i))) is not None:
        node = ray.get(w.where.remote())["node"][:8]
        counts[node] = counts.get(node, 0) + 2  # a worker and its market-data replica
        i += 1
    return counts


def measure(sizes: list[int], latency: float, address: str | None, workdir: Path) -> dict:
    from actors import runtime
    runtime.start(address) if address else runtime.start(num_cpus=2)
    bench = Bench(workdir, address)
    bench.run(1, 0.0)  # warm-up: every replica started, imports done
    _, _, rows = bench.run(1, latency)
    from events.duckdb_store import DuckDBEventStore
    path = workdir / f"s{bench.count}.duckdb"
    if address:  # on a cluster the store actor keeps the file: let it go first
        runtime.release_store(runtime.store_actor(path))
    with DuckDBEventStore(path, read_only=True) as store:
        events = store.read_stream(rows[0]["run_id"])
    per_turn: dict[str, int] = {}
    for e in events:
        if e.type == "LLMCallCompleted":
            per_turn[e.payload.turn_id] = per_turn.get(e.payload.turn_id, 0) + 1
    calls = max((n for t, n in per_turn.items() if t.startswith("analyst:")), default=0) + sum(
        n for t, n in per_turn.items() if not t.startswith("analyst:"))
    critical = calls * latency
    figures: dict = {"critical_path_s": round(critical, 3), "critical_path_calls": calls}
    for n in sizes:
        wall, rss, rows = bench.run(n, latency)
        assert all(r["status"] == "completed" for r in rows), rows
        figures[f"wall_{n}_s"] = round(wall, 2)
        figures[f"ratio_{n}"] = round(wall / critical, 3)
        figures[f"rss_{n}_mb"] = round(rss)
        print(f"{n:>3} tickers: wall {wall:6.2f} s  ratio {wall / critical:5.2f}  "
              f"peak RSS {rss:6.0f} MiB", flush=True)
    kinds = processes()
    n = max(sizes)
    before = {k: sum(cpu_seconds(p) for p in pids) for k, pids in kinds.items()}
    wall, _, rows = bench.run(n, 0.0)
    after = {k: sum(cpu_seconds(p) for p in pids) for k, pids in kinds.items()}
    per_run = {k: round((after[k] - before[k]) * 1000 / n, 1) for k in kinds}
    total = sum(per_run.values())
    figures["cpu_ms_per_run_by_kind"] = per_run
    figures["cpu_ms_per_run"] = round(total, 1)
    figures["max_process_share"] = round(max(per_run.values()) / total, 3) if total else 0.0
    figures["zero_latency_runs_per_s"] = round(n / wall, 2)
    figures["processes"] = {k: len(v) for k, v in kinds.items()}
    figures["replicas_per_node"] = replicas_per_node()
    print(f"CPU per run at zero latency ({n} runs): {total:.0f} ms  {per_run}", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--sizes", default="1,8,32,64")
    parser.add_argument("--no-cluster", action="store_true")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker and market-data replicas (default: one per node)")
    parser.add_argument("--simulate", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    sizes = [int(s) for s in args.sizes.split(",")]
    global WORKERS
    WORKERS = args.workers
    workdir = Path(tempfile.mkdtemp(prefix="ta-bench-cluster-"))
    os.environ["TA_ACTORS_CACHE"] = str(workdir / "cache.duckdb")
    if args.simulate:  # child process: a simulated cluster of its own
        os.environ["RAY_AUTH_MODE"] = "disabled"
        from ray.cluster_utils import Cluster
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        for _ in range(args.simulate - 1):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        print(json.dumps(measure(sizes, args.latency, cluster.address, workdir)))
        return
    first = cold_run(workdir)  # also compiles bytecode and warms the disk cache after an edit
    cold = cold_run(workdir)
    print(f"cold one-ticker run (process, Ray start included): {cold:.2f} s "
          f"(the very first after a code change: {first:.2f} s)", flush=True)
    print("one node:", flush=True)
    single = measure(sizes, args.latency, None, workdir)
    result = {"cold_run_s": round(cold, 2), **single}
    if not args.no_cluster:
        import ray
        ray.shutdown()
        print("simulated 3-node cluster:", flush=True)
        child = subprocess.run([sys.executable, "-m", "bench.cluster", "--simulate", "3",
                                "--latency", str(args.latency), "--sizes", args.sizes]
                               + (["--workers", str(args.workers)] if args.workers else []),
                               capture_output=True, text=True, cwd=REPO)
        lines = [ln for ln in child.stdout.splitlines() if ln.strip()]
        for line in lines[:-1]:
            print("  " + line)
        three = json.loads(lines[-1]) if lines else {"error": child.stderr[-500:]}
        result["cluster_3"] = three
        result["replicas_per_node"] = three.get("replicas_per_node")
    summary = {k: result.get(k) for k in ("ratio_8", "ratio_32", "ratio_64", "cpu_ms_per_run",
                                          "max_process_share", "cold_run_s", "rss_64_mb",
                                          "replicas_per_node")}
    print(json.dumps({**summary, "details": result}))


if __name__ == "__main__":
    main()
