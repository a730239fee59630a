"""A default run against a real small local model: wall time, tokens/s, queued time, calls.

    python -m bench.real_model [--ticker MSFT] [--date 2024-06-14] [--analysts ...]
                               [--data-dir ../shared/data/ohlcv] [--base-url URL]

Starts llama.cpp's server with SmolLM2-135M (``bench.local_llm``; one slot, CPU) unless
``--base-url`` names a running one, runs ``ta-actors run`` as a user would (all four
analysts, one round each, real prices), stops the server it started, and prints one JSON
line. Exit 0 with ``{"skipped": reason}`` where the server cannot run on this machine.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import local_llm

REPO = Path(__file__).resolve().parents[1]


def summarize(events: list) -> dict:
    """The figures of one run, from its events: calls, tokens, streaming speed, queueing."""
    calls = [e.payload for e in events if e.type == "LLMCallCompleted"]
    streamed = [c for c in calls if c.stream_chunks]
    # generation speed: output tokens over the time from the first token to the end
    gen_s = sum(max(0.0, c.latency_ms - (c.queued_ms or 0) - (c.first_chunk_ms or 0)) / 1000
                for c in streamed)
    out_tokens = sum(c.output_tokens for c in streamed)
    queued = [c.queued_ms or 0.0 for c in calls]
    span = (events[-1].recorded_at - events[0].recorded_at).total_seconds() if events else 0.0
    return {
        "status": events[-1].type if events else "none",
        "run_s": round(span, 1),
        "llm_calls": len(calls), "streamed_calls": len(streamed),
        "tool_calls": sum(e.type == "ToolCallCompleted" for e in events),
        "input_tokens": sum(c.input_tokens for c in calls), "output_tokens": out_tokens,
        "tokens_per_s": round(out_tokens / gen_s, 1) if gen_s else None,
        "first_token_s_mean": round(sum((c.first_chunk_ms or 0) for c in streamed)
                                    / max(1, len(streamed)) / 1000, 1),
        "queued_s_total": round(sum(queued) / 1000, 1),
        "queued_s_max": round(max(queued, default=0.0) / 1000, 1),
        "queued_calls": sum(q > 0 for q in queued),
        "condensed_calls": sum(bool(c.condensed) for c in calls),
        "structured_decisions": sum(c.output_mode == "structured" for c in calls),
    }


def run(base_url: str, model: str, args: argparse.Namespace, workdir: Path) -> dict:
    from events.duckdb_store import DuckDBEventStore

    store = workdir / "events.duckdb"
    exe = Path(sys.executable).parent / "ta-actors"
    cmd = [str(exe), "run", args.ticker, "--date", args.date, "--data-dir", args.data_dir,
           "--analysts", args.analysts, "--quick-model", model, "--deep-model", model,
           "--base-url", base_url, "--store", str(store), "--json"]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    wall = time.perf_counter() - started
    rows = json.loads(done.stdout) if done.stdout.strip().startswith("[") else []
    if not rows:
        raise SystemExit(f"run failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    (row,) = rows
    with DuckDBEventStore(store, read_only=True) as opened:
        events = opened.read_stream(row["run_id"])
    return {"bench": "real_model", "model": model, "ticker": args.ticker, "date": args.date,
            "analysts": args.analysts, "wall_s": round(wall, 1), "rating": row.get("rating"),
            "run_status": row["status"], **summarize(events)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticker", default="MSFT")
    parser.add_argument("--date", default="2024-06-14")
    parser.add_argument("--analysts", default="market,social,news,fundamentals")
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "ohlcv"))
    parser.add_argument("--base-url", help="a running server (else one is started)")
    parser.add_argument("--model", default=local_llm.MODEL)
    args = parser.parse_args()
    server = None
    if args.base_url:
        base_url, model = args.base_url, args.model
    else:
        try:
            server = local_llm.start()
        except local_llm.Unavailable as exc:
            print(json.dumps({"bench": "real_model", "skipped": str(exc)}))
            return
        base_url, model = server.url, server.model
    try:
        with tempfile.TemporaryDirectory(prefix="ta-real-model-") as tmp:
            result = run(base_url, model, args, Path(tmp))
    finally:
        if server is not None:
            local_llm.stop(server)
    print(json.dumps(result))
    if result["run_status"] != "completed":
        raise SystemExit(1)


if __name__ == "__main__":
    main()
