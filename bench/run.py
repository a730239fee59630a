"""Orchestration benchmark: how close a run gets to its critical path, alone and 8 at once.

    python -m bench.run [--latency 0.5] [--data-dir ../shared/data/ohlcv]

The offline model sleeps ``latency`` per call, so the lower bound of a run is its chain of
sequential model calls (the four analysts in parallel count as their longest tool loop) times
the latency. The last line is one JSON object for scripts.
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
TICKERS = ("NVDA", "AAPL", "MSFT", "AMZN", "GOOGL", "META", "TSLA", "SPY")
DATES = ("2024-05-10", "2024-03-08", "2023-11-10")


def cold_run(data_dir: Path, workdir: Path) -> float:
    """A whole `ta-actors run` process, Ray start included, no simulated latency."""
    exe = Path(sys.executable).parent / "ta-actors"
    cmd = [str(exe), "run", "NVDA", "--date", DATES[0], "--data-dir", str(data_dir),
           "--store", str(workdir / "cold.duckdb"), "--json"]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"cold run failed: {done.stderr.strip()[-500:]}")
    return elapsed


def critical_calls(events: list) -> int:
    """Sequential model calls on the run's longest path, read from its events."""
    per_turn: dict[str, int] = {}
    for e in events:
        if e.type == "LLMCallCompleted":
            per_turn[e.payload.turn_id] = per_turn.get(e.payload.turn_id, 0) + 1
    analysts = max((n for t, n in per_turn.items() if t.startswith("analyst:")), default=0)
    return analysts + sum(n for t, n in per_turn.items() if not t.startswith("analyst:"))


def run_span(streams: list[list]) -> float:
    """Seconds from the first RunRequested to the last RunCompleted, from the events."""
    first = min(events[0].recorded_at for events in streams)
    last = max(events[-1].recorded_at for events in streams)
    return (last - first).total_seconds()


def timed_run(cli, tickers: tuple[str, ...], day: str, data_dir: Path, store: Path,
              latency: float) -> tuple[float, float, list[dict]]:
    args = ["run", *tickers, "--date", day, "--data-dir", str(data_dir), "--store", str(store),
            "--latency", str(latency), "--json"]
    with PeakSampler() as sampler:
        started = time.perf_counter()
        result = cli.invoke(args)
        wall = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(f"run failed: {result.output[-800:]}")
    return wall, sampler.peak, json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data" / "ohlcv")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    workdir = Path(tempfile.mkdtemp(prefix="ta-bench-"))
    os.environ["TA_ACTORS_CACHE"] = str(workdir / "cache.duckdb")

    cold = cold_run(args.data_dir, workdir)
    print(f"cold one-ticker run (process, Ray start included): {cold:.2f} s")

    from typer.testing import CliRunner

    from actors import runtime
    from cli.app import app
    from events.duckdb_store import DuckDBEventStore

    runtime.start()

    class Cli:
        runner = CliRunner()

        def invoke(self, argv):
            return self.runner.invoke(app, argv, catch_exceptions=False)
    cli = Cli()
    timed_run(cli, ("SPY",), DATES[2], args.data_dir, workdir / "warm.duckdb", 0.0)  # warm-up

    wall_1, rss_1, rows_1 = timed_run(cli, TICKERS[:1], DATES[0], args.data_dir,
                                      workdir / "one.duckdb", args.latency)
    wall_8, rss_8, rows_8 = timed_run(cli, TICKERS, DATES[1], args.data_dir,
                                      workdir / "eight.duckdb", args.latency)
    with DuckDBEventStore(workdir / "one.duckdb", read_only=True) as store:
        events = store.read_stream(rows_1[0]["run_id"])
    calls = critical_calls(events)
    critical = calls * args.latency
    with DuckDBEventStore(workdir / "eight.duckdb", read_only=True) as store:
        streams_8 = [store.read_stream(r["run_id"]) for r in rows_8]
    critical_8 = max(critical_calls(events_8) for events_8 in streams_8) * args.latency
    span_1, span_8 = run_span([events]), run_span(streams_8)
    figures = {
        "latency_s": args.latency, "critical_path_calls": calls,
        "critical_path_s": round(critical, 3), "critical_path_8_s": round(critical_8, 3),
        "wall_1_s": round(wall_1, 3), "wall_8_s": round(wall_8, 3),
        "ratio_1": round(wall_1 / critical, 3), "ratio_8": round(wall_8 / critical, 3),
        "llm_calls_per_run": rows_1[0]["llm_calls"], "tool_calls_per_run": rows_1[0]["tool_calls"],
        "rss_1_mb": round(rss_1, 1), "rss_8_mb": round(rss_8, 1),
        "rss_ratio": round(rss_8 / rss_1, 3), "cold_run_s": round(cold, 3),
        "span_1_s": round(span_1, 3), "span_8_s": round(span_8, 3),
        "span_ratio_1": round(span_1 / critical, 3), "span_ratio_8": round(span_8 / critical, 3),
        "all_completed": all(r["status"] == "completed" for r in rows_1 + rows_8),
    }
    print(f"critical path: {calls} sequential model calls x {args.latency} s = {critical:.2f} s")
    print(f"1 ticker : wall {wall_1:.2f} s, ratio {figures['ratio_1']}, peak RSS {rss_1:.0f} MiB")
    print(f"8 tickers: wall {wall_8:.2f} s, ratio {figures['ratio_8']} (vs single critical path), "
          f"peak RSS {rss_8:.0f} MiB")
    print(f"runs alone (first RunRequested to last RunCompleted, no CLI around them): "
          f"1 ticker {span_1:.2f} s, 8 tickers {span_8:.2f} s")
    print(f"per run: {figures['llm_calls_per_run']} LLM calls, "
          f"{figures['tool_calls_per_run']} tool calls")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
