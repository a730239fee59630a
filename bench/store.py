"""Event-store benchmark: append throughput and the cost of reading one run back.

    python -m bench.store                 # full size: 1,000,000 events in 10,000 streams
    python -m bench.store --events 50000  # quick check

Measures, on a DuckDB file in a temporary folder (deleted afterwards unless --keep):
* appends one event per call (one commit each: bounded by fsync), in batches of 100 and 1,000;
* building a big store of run-like streams (100 events each) with group commits of 1,000
  events, interleaved as when many runs write at once (``--layout contiguous``: one by one);
* reading one 100-event stream out of the big store and folding it into a run state
  (``projections.run_state.project`` when it is importable, else a local fold), median of
  several random streams after a reopen;
* ``verify_all`` of the big store (one chunked pass): time and peak RSS of this process.
Payloads are realistic: RunRequested, then TurnAssigned / LLMCallCompleted (~2 KB of text) /
DebateArgumentMade. The last line printed is one JSON object with every figure.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import shutil
import statistics
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from events import domain as d
from events.config import RunConfig
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent
from events.records import Message
from events.store import AppendRequest

STREAM_LEN = 100
WORDS = ["revenue", "margin", "guidance", "datacenter", "demand", "supply", "valuation", "multiple", "momentum", "rsi", "macd", "support", "resistance", "breakout", "earnings", "capex", "inventory", "hyperscaler", "export", "risk", "catalyst", "downside", "upside", "consensus", "estimate", "revision", "volatility", "drawdown"]
CONFIG = RunConfig(ticker="NVDA", trade_date=dt.date(2024, 5, 10))
KEY = os.urandom(32)  # a throwaway chain key: the benchmark never touches the user's key file


def _texts(rng: random.Random, count: int, size: int) -> list[str]:
    """A pool of distinct word salads, so the file does not compress unrealistically well."""
    pool = []
    for _ in range(count):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size:
            words.append(rng.choice(WORDS))
        pool.append(" ".join(words))
    return pool


class Payloads:
    """Builds the events of run-like streams: 1 RunRequested, then turn / LLM call / argument."""

    def __init__(self, seed: int = 7):
        rng = random.Random(seed)
        self.responses = _texts(rng, 64, 1800)
        self.arguments = _texts(rng, 64, 400)
        self.prompt = [Message(role="system", content="You are the bull researcher."),
                       Message(role="user", content="Make the bull case for NVDA on 2024-05-10.")]

    def event(self, stream: str, seq: int) -> NewEvent:
        if seq == 1:
            return NewEvent(d.RunRequested(run_id=stream, config=CONFIG), actor="cli")
        turn, kind = divmod(seq - 2, 3)
        turn_id = f"{stream}/bull/{turn}"
        text = self.responses[(seq + zlib.crc32(stream.encode())) % 64]
        if kind == 0:
            payload: d.DomainEvent = d.TurnAssigned(turn_id=turn_id, role="bull", round=turn + 1)
        elif kind == 1:
            payload = d.LLMCallCompleted(
                turn_id=turn_id, role="bull", call_index=1, tier="quick", model="openai/gpt-4o",
                provider="openai", messages=self.prompt, response_text=text, input_tokens=950,
                output_tokens=420, cost_usd=0.0061, latency_ms=2400.0)
        else:
            payload = d.DebateArgumentMade(turn_id=turn_id, speaker="bull", round=turn + 1,
                                           argument=self.arguments[seq % 64])
        return NewEvent(payload, actor="bull", causation_id=turn_id)

    def batch(self, stream: str, first_seq: int, size: int) -> list[NewEvent]:
        return [self.event(stream, first_seq + i) for i in range(size)]


def _fold() -> tuple[str, Callable[[Iterable], object]]:
    try:
        from projections.run_state import project
        return "projections.run_state.project", project
    except ImportError:
        return "local type count", lambda events: Counter(e.type for e in events)


def bench_appends(path: Path, payloads: Payloads, single: int, batched: int
                  ) -> dict[str, float]:
    """Events per second for one event per append, and batches of 100 and 1,000."""
    out = {}
    with DuckDBEventStore(path, chain_key=KEY) as store:
        start = time.perf_counter()
        for seq in range(1, single + 1):
            store.append("single", [payloads.event("single", seq)])
        out["append_single_eps"] = single / (time.perf_counter() - start)
        for size in (100, 1000):
            batches = max(1, batched // size)
            work = [payloads.batch(f"b{size}-{i}", 1, size) for i in range(batches)]
            start = time.perf_counter()  # encoding, hashing and the commit; not building models
            for i, events in enumerate(work):
                store.append(f"b{size}-{i}", events)
            out[f"append_batch{size}_eps"] = batches * size / (time.perf_counter() - start)
    return out


def build_big_store(path: Path, payloads: Payloads, events: int, interleaved: bool
                    ) -> tuple[int, float]:
    """``events`` events in streams of 100, 1,000 events per group commit.

    ``interleaved``: every commit carries 10 events of each of 100 streams, as when many runs
    write at once, so a stream's rows are spread over the file (no zone-map luck on reads).
    Otherwise 10 whole streams per commit: each stream's rows sit together."""
    streams = max(1, events // STREAM_LEN)
    names = [f"run-{i:06d}" for i in range(streams)]
    per_group, chunk = (100, 10) if interleaved else (10, STREAM_LEN)
    start, report = time.perf_counter(), time.perf_counter()
    with DuckDBEventStore(path, chain_key=KEY) as store:
        for first_seq in range(1, STREAM_LEN + 1, chunk):
            for first in range(0, streams, per_group):
                requests = [AppendRequest(s, payloads.batch(s, first_seq, chunk))
                            for s in names[first:first + per_group]]
                for result in store.append_batches(requests):
                    if isinstance(result, Exception):
                        raise result
                if time.perf_counter() - report > 10:
                    report = time.perf_counter()
                    print(f"  ... {store.last_position():,} events", flush=True)
        total = store.last_position()
    return streams, total / (time.perf_counter() - start)


def bench_reads(path: Path, streams: int, samples: int, seed: int = 11) -> dict[str, object]:
    """Median (and worst) ms to read one stream and fold it, over random streams, reopened."""
    fold_name, fold = _fold()
    rng = random.Random(seed)
    chosen = [f"run-{rng.randrange(streams):06d}" for _ in range(samples)]
    read_ms, fold_ms, total_ms = [], [], []
    with DuckDBEventStore(path, read_only=True, chain_key=KEY) as store:
        start = time.perf_counter()
        first = store.read_stream(chosen[0])
        cold_ms = (time.perf_counter() - start) * 1000
        assert len(first) == STREAM_LEN, f"{chosen[0]} has {len(first)} events"
        for stream in chosen:
            t0 = time.perf_counter()
            events = store.read_stream(stream)
            t1 = time.perf_counter()
            state = fold(events)
            t2 = time.perf_counter()
            assert len(events) == STREAM_LEN and state is not None
            read_ms.append((t1 - t0) * 1000)
            fold_ms.append((t2 - t1) * 1000)
            total_ms.append((t2 - t0) * 1000)
        store_events = store.last_position()
    return {"read_stream_ms": statistics.median(total_ms), "read_stream_max_ms": max(total_ms),
            "read_only_ms": statistics.median(read_ms), "fold_ms": statistics.median(fold_ms),
            "first_read_ms": cold_ms, "fold": fold_name, "store_events": store_events,
            "read_samples": samples}


def bench_verify(path: Path) -> dict[str, float]:
    """One full verify of the big store, read-only (no checkpoint written)."""
    with DuckDBEventStore(path, read_only=True, chain_key=KEY) as store:
        start = time.perf_counter()
        report = store.verify_all()
        seconds = time.perf_counter() - start
    assert report.ok, report.problems
    return {"verify_s": seconds, "verify_eps": report.events / seconds,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="size of the big store")
    parser.add_argument("--single", type=int, default=300, help="events appended one by one")
    parser.add_argument("--batched", type=int, default=20_000,
                        help="events appended per batch size (100 and 1,000)")
    parser.add_argument("--samples", type=int, default=25, help="streams read and folded")
    parser.add_argument("--layout", choices=("interleaved", "contiguous"), default="interleaved",
                        help="many runs writing at once (default), or one stream after another")
    parser.add_argument("--dir", type=Path, help="folder for the store files (default: temp)")
    parser.add_argument("--keep", action="store_true", help="keep the store files")
    args = parser.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="bench-store-", dir=args.dir))
    payloads = Payloads()
    try:
        print(f"event-store benchmark in {folder}", flush=True)
        result: dict[str, object] = bench_appends(folder / "appends.duckdb", payloads,
                                                  args.single, args.batched)
        for key in ("append_single_eps", "append_batch100_eps", "append_batch1000_eps"):
            print(f"{key:>24}: {result[key]:>10,.0f} events/s", flush=True)

        big = folder / "big.duckdb"
        print(f"building {args.events:,} events in streams of {STREAM_LEN}, {args.layout} ...",
              flush=True)
        start = time.perf_counter()
        streams, build_eps = build_big_store(big, payloads, args.events,
                                             args.layout == "interleaved")
        result.update(build_s=time.perf_counter() - start, build_eps=build_eps, streams=streams,
                      layout=args.layout, file_mb=big.stat().st_size / 2**20)
        print(f"{'build':>24}: {build_eps:>10,.0f} events/s ({result['build_s']:.1f} s, "
              f"{result['file_mb']:.0f} MB)", flush=True)

        result.update(bench_reads(big, streams, args.samples))
        print(f"{'read+fold one stream':>24}: {result['read_stream_ms']:>10.2f} ms median "
              f"(read {result['read_only_ms']:.2f} ms, fold {result['fold_ms']:.2f} ms, "
              f"worst {result['read_stream_max_ms']:.2f} ms, first {result['first_read_ms']:.2f}"
              f" ms) out of {result['store_events']:,} events; fold = {result['fold']}")
        result.update(bench_verify(big))
        print(f"{'verify_all':>24}: {result['verify_eps']:>10,.0f} events/s "
              f"({result['verify_s']:.1f} s; peak RSS of this process so far "
              f"{result['peak_rss_mb']:.0f} MB)", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    result = {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}
    print(json.dumps(result, sort_keys=True))
    return result


if __name__ == "__main__":
    main()
