"""Lean events: stored payload bytes per run, before and after content-addressed bodies.

    python -m bench.lean --store PATH            # measure an existing store
    python -m bench.lean --tickers NVDA AAPL     # make real offline runs first (temp store)

For every run stream it counts what the store holds for it: the stored (lean) payload texts
plus the bodies that run was the first to store, at their stored size (zlib-packed where that
saves; bodies are shared across runs, so each is counted once, for the run that brought it),
and compares with the full payload JSON, as it was
stored before lean events. Data: real prices from ../shared/data/ohlcv, the offline model.
The last line printed is one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_runs(store: Path, tickers: list[str], date: str, data_dir: Path) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_ADDRESS": os.environ.get("RAY_ADDRESS", "local")}
    command = str(Path(sys.executable).parent / "ta-actors")
    for ticker in tickers:
        subprocess.run([command, "run", ticker, "--date", date,
                        "--data-dir", str(data_dir), "--store", str(store), "--json"],
                       check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL)


def measure(store: Path) -> dict:
    from events import bodies as lean
    from events.duckdb_store import DuckDBEventStore
    out: dict[str, dict] = {}
    seen: set[str] = set()
    duck = DuckDBEventStore(store, read_only=True, chain_key=b"unused: nothing is checked")
    with duck as s:
        after = 0
        while True:
            rows = s._raw_all(after, 5000, None)
            if not rows:
                break
            after = rows[-1].position
            found = s._bodies_for(rows)
            stored = duck._body_sizes(sorted(found))
            for row in rows:
                run = out.setdefault(row.stream, {"events": 0, "full": 0, "lean": 0})
                run["events"] += 1
                run["lean"] += len(row.payload_json.encode())
                refs = lean.refs_of(row.payload_json) if row.chain >= 2 else set()
                for bid in refs - seen:
                    run["lean"] += stored[bid]  # as the table holds it (packed or text)
                seen |= refs
                run["full"] += len((lean.full_json(row.payload_json, found)
                                    if row.chain >= 2 else row.payload_json).encode())
    runs = {k: v for k, v in out.items() if v["events"] > 5}  # run streams, not memory
    n = max(len(runs), 1)
    return {"runs": len(runs), "events": sum(v["events"] for v in runs.values()),
            "full_bytes_per_run": round(sum(v["full"] for v in runs.values()) / n),
            "lean_bytes_per_run": round(sum(v["lean"] for v in runs.values()) / n),
            "per_run": {k: (v["full"], v["lean"]) for k, v in runs.items()}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, help="an existing store to measure")
    parser.add_argument("--tickers", nargs="*", default=["NVDA", "AAPL"])
    parser.add_argument("--date", default="2024-05-10")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared/data/ohlcv")
    args = parser.parse_args(argv)
    store = args.store
    if store is None:
        store = Path(tempfile.mkdtemp(prefix="bench-lean-")) / "events.duckdb"
        make_runs(store, args.tickers, args.date, args.data_dir)
    result = measure(store)
    for run, (full, lean_bytes) in result["per_run"].items():
        print(f"{run:>40}: {full:>8,} B full -> {lean_bytes:>8,} B stored "
              f"({lean_bytes / full:.0%})")
    print(json.dumps({k: v for k, v in result.items() if k != "per_run"}))
    return result


if __name__ == "__main__":
    main()
