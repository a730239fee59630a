"""History benchmark: what a run, `runs`, `memory show`, `stats` and `verify` cost when the
store already holds thousands of runs.

    python -m bench.history [--runs 100000] [--sizes 1000,10000] [--data-dir ../shared/data/ohlcv]

1. A few real runs (the whole default team, offline model, real prices) are made through the
   CLI, plus a second run of one ticker so that an outcome and a reflection are recorded.
2. For each size, a store is built by copying those runs under new run ids, tickers and trade
   dates (50 tickers, one trading day after another), with the store's own append in large
   batches (so every hash chain is valid) and the read models kept as the store actor keeps
   them (applied after each commit); four in five copied decisions get an outcome and a
   reflection on the memory stream, one week after their trade date.
3. Per size: the CLI commands as subprocesses (median of three: wall time, CPU, and the peak
   RSS of the process), the extra time a new one-ticker run spends before its analysts start
   (RunRequested -> PastContextLoaded, median of three runs, compared with the same on an
   empty store), payload bytes per run (packed bodies at their stored size), and the store's
   CPU per copied run (append, hash, insert, read-model update, in process).

The last line is one JSON object for the largest size.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).parent / "ta-actors")
TEMPLATE_TICKERS = ("AAPL", "NVDA", "MSFT")
FIRST_DATE = dt.date(2024, 1, 5)
N_TICKERS = 50
BATCH_RUNS = 200
REPEATS = 3  # samples per timed command and per new run (median)


class Timed(NamedTuple):
    seconds: float
    rss_mb: float
    cpu_s: float  # user + system of the command process
    out: str


def cli(*args: str, check: bool = True) -> Timed:
    """Run `ta-actors ARGS` in a fresh process."""
    with tempfile.NamedTemporaryFile() as rss:
        # /usr/bin/time -f %M: the peak RSS of the command itself (a child forked from this
        # big process would inherit its high-water mark). RAY_ADDRESS=local: a `ray start`
        # cluster left on this machine must not be joined.
        env = {"RAY_ADDRESS": "local"} | os.environ
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", rss.name, EXE, *args],
                              capture_output=True, text=True, cwd=REPO, env=env)
        elapsed = time.perf_counter() - started
        if check and done.returncode != 0:
            raise SystemExit(f"ta-actors {' '.join(args)} failed: {done.stderr[-800:]}")
        peak_kb, user, system = Path(rss.name).read_text().split()[-3:]
    return Timed(elapsed, int(peak_kb) / 1024, float(user) + float(system), done.stdout)


def median_of(*args: str, repeats: int = REPEATS) -> Timed:
    """The same command ``repeats`` times: median time and CPU, highest RSS, last output.
    One sample of a half-second command on a shared machine is mostly noise."""
    runs = [cli(*args) for _ in range(repeats)]
    return Timed(statistics.median(r.seconds for r in runs), max(r.rss_mb for r in runs),
                 statistics.median(r.cpu_s for r in runs), runs[-1].out)


def make_templates(data_dir: Path, work: Path) -> Path:
    """Real runs: three tickers on one date, then the first ticker a week later (scoring it)."""
    path = work / "templates.duckdb"
    if path.exists():  # kept from an earlier call (--keep): reuse
        return path
    cli("run", *TEMPLATE_TICKERS, "--date", str(FIRST_DATE), "--data-dir", str(data_dir),
        "--store", str(path), "--json")
    cli("run", TEMPLATE_TICKERS[0], "--date", str(FIRST_DATE + dt.timedelta(days=7)),
        "--data-dir", str(data_dir), "--store", str(path), "--json")
    return path


def load_templates(path: Path) -> tuple[list[list], list]:
    """The template runs' events, and one resolution triple (outcome, call, reflection)."""
    from events.duckdb_store import DuckDBEventStore
    with DuckDBEventStore(path, read_only=True) as store:
        runs = [store.read_stream(s.stream) for s in store.list_streams()
                if s.stream != "memory"]
        memory = store.read_stream("memory")
    runs = [r for r in runs if r and r[0].type == "RunRequested" and r[-1].type == "RunCompleted"]
    resolution = memory[:3]
    assert [e.type for e in resolution] == ["OutcomeResolved", "LLMCallCompleted",
                                            "ReflectionRecorded"], [e.type for e in memory]
    return runs, resolution


def trading_days(start: dt.date, n: int) -> list[dt.date]:
    days: list[dt.date] = []
    day = start
    while len(days) < n:
        if day.weekday() < 5:
            days.append(day)
        day += dt.timedelta(days=1)
    return days


def build(path: Path, n_runs: int, runs: list[list], resolution: list) -> dict:
    """A store of ``n_runs`` copied runs (plus their resolutions), read models included."""
    from events.duckdb_store import DuckDBEventStore
    from events.envelope import NewEvent
    from events.store import AppendRequest
    from events.views import open_views
    from projections.views import VIEWS
    tickers = [f"T{i:03d}" for i in range(N_TICKERS - len(TEMPLATE_TICKERS))] + list(
        TEMPLATE_TICKERS)
    days = trading_days(FIRST_DATE - dt.timedelta(days=2 * n_runs // N_TICKERS + 30),
                        n_runs // N_TICKERS + 1)
    outcome, call, reflection = resolution
    store = DuckDBEventStore(path)
    views = open_views(store, VIEWS)
    cpu = time.process_time()
    wall = time.perf_counter()
    requests: list = []
    for i in range(n_runs):
        template = runs[i % len(runs)]
        run_id, ticker, day = f"h{i:06d}", tickers[i % N_TICKERS], days[i // N_TICKERS]
        first = template[0].payload
        copied = [NewEvent(first.model_copy(update={
            "run_id": run_id, "config": first.config.model_copy(
                update={"ticker": ticker, "trade_date": day})}), template[0].actor)]
        copied += [NewEvent(e.payload, e.actor, e.causation_id) for e in template[1:]]
        requests.append(AppendRequest(stream=run_id, events=copied))
        # one in five synthetic decisions stays pending (as do the newest); the real tickers'
        # are all resolved, so that the measured run does not score dozens of them first
        if ticker in TEMPLATE_TICKERS or (i % 5 != 4 and day + dt.timedelta(days=7) < days[-1]):
            key = {"run_id": run_id, "ticker": ticker, "trade_date": day}
            requests.append(AppendRequest(stream="memory", events=[
                NewEvent(outcome.payload.model_copy(update=key | {
                    "resolved_on": day + dt.timedelta(days=7)}), outcome.actor),
                NewEvent(call.payload, call.actor),
                NewEvent(reflection.payload.model_copy(update=key), reflection.actor)]))
        if len(requests) >= BATCH_RUNS or i == n_runs - 1:
            results = store.append_batches(requests)
            stored = []
            for r in results:
                if isinstance(r, Exception):
                    raise r
                stored += r
            views.after_commit(store, stored)
            requests = []
            if (i + 1) % 2000 == 0:
                print(f"  built {i + 1:,} runs", file=sys.stderr, flush=True)
    info = {"cpu_ms_per_run": (time.process_time() - cpu) * 1000 / n_runs,
            "build_s": time.perf_counter() - wall, "events": store.last_position(),
            "rows": views.counts()}
    views.close()
    store.close()
    return info


def payload_bytes(path: Path) -> int:
    """Stored payload: the events' payload column plus the bodies table (text, or packed)."""
    import duckdb
    con = duckdb.connect(str(path), read_only=True)
    try:
        def scalar(sql: str) -> int:
            row = con.execute(sql).fetchone()
            return int(row[0] or 0) if row else 0
        total = scalar("SELECT sum(strlen(payload)) FROM events")
        columns = {c for (c,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'bodies'").fetchall()}
        if "packed" in columns:  # packed (zlib) bodies count at their stored size
            total += scalar("SELECT sum(coalesce(octet_length(packed), strlen(text))) FROM bodies")
        elif "text" in columns:
            total += scalar("SELECT sum(strlen(text)) FROM bodies")
        return int(total)
    finally:
        con.close()


def context_seconds(path: Path, run_id: str) -> float:
    """RunRequested -> PastContextLoaded of one run, from the recorded times."""
    from events.duckdb_store import DuckDBEventStore
    with DuckDBEventStore(path, read_only=True) as store:
        events = store.read_stream(run_id)
    at = {e.type: e.recorded_at for e in events}
    return (at["PastContextLoaded"] - at["RunRequested"]).total_seconds()


def new_run(path: Path, data_dir: Path) -> tuple[float, float]:
    """(whole command seconds, seconds to the past context) of a one-ticker run: the median
    of REPEATS runs (each adds one run to the store)."""
    samples = []
    for _ in range(REPEATS):
        done = cli("run", "NVDA", "--date", "2024-05-10", "--data-dir", str(data_dir),
                   "--store", str(path), "--json")
        (row,) = json.loads(done.out)
        samples.append((done.seconds, context_seconds(path, row["run_id"])))
    return (statistics.median(s for s, _ in samples), statistics.median(c for _, c in samples))


def past_context_query_s(path: Path) -> float:
    """What the past-context step costs through the read model (the query the coordinator
    calls, then the same text rendering), in process: median of 5."""
    from events.duckdb_store import DuckDBEventStore
    from events.views import open_views
    from projections.memory import past_context
    from projections.views import VIEWS, entries_from_rows
    with DuckDBEventStore(path) as store:
        views = open_views(store, VIEWS)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            views.catch_up(store)
            rows = views.query("past_context", {"ticker": "NVDA",
                                                "trade_date": dt.date(2024, 5, 10)})
            past_context(entries_from_rows(rows), "NVDA", dt.date(2024, 5, 10))
            views.query("pending", {"ticker": "NVDA", "before": dt.date(2024, 5, 10)})
            times.append(time.perf_counter() - started)
        views.close()
    return sorted(times)[2]


def measure(path: Path, n_runs: int, data_dir: Path, empty_context: float) -> dict:
    store = ["--store", str(path)]
    query_s = past_context_query_s(path)
    listed = median_of("runs", "--limit", "50", "--json", *store)
    assert len(json.loads(listed.out)) == 50
    memory = median_of("memory", "show", "--ticker", "NVDA", "--json", *store)
    assert json.loads(memory.out)
    stats = median_of("stats", "--by", "model", "--json", *store)
    assert sum(r["calls"] for r in json.loads(stats.out)) > n_runs
    verify_s, verify_mb, _, out = cli("verify", "--json", *store, check=False)
    try:
        if not json.loads(out)["ok"]:
            print(f"verify found problems: {out[:500]}", file=sys.stderr)
    except ValueError:
        print("verify failed to run: its figures are not meaningful", file=sys.stderr)
        verify_s = verify_mb = float("nan")
    bytes_per_run = payload_bytes(path) / n_runs
    run_s, context_s = new_run(path, data_dir)
    return {"runs_in_store": n_runs, "run_s": run_s, "context_s": context_s,
            "past_context_query_s": query_s,
            "run_start_overhead_s": max(0.0, context_s - empty_context),
            "runs_list_s": listed.seconds, "runs_list_rss_mb": listed.rss_mb,
            "runs_list_cpu_s": listed.cpu_s,
            "memory_show_s": memory.seconds, "memory_show_rss_mb": memory.rss_mb,
            "memory_show_cpu_s": memory.cpu_s,
            "stats_s": stats.seconds, "stats_rss_mb": stats.rss_mb, "stats_cpu_s": stats.cpu_s,
            "verify_s": verify_s, "verify_rss_mb": verify_mb,
            "bytes_per_run": round(bytes_per_run)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="largest store size")
    parser.add_argument("--sizes", default=None,
                        help="comma-separated sizes (default 1000 and --runs)")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data" / "ohlcv")
    parser.add_argument("--keep", type=Path, default=None, help="keep the stores in this folder")
    args = parser.parse_args()
    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes
             else sorted({min(1000, args.runs), args.runs}))
    work = Path(tempfile.mkdtemp(prefix="bench-history-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        print("making template runs (real team, offline model, real prices) ...",
              file=sys.stderr, flush=True)
        runs, resolution = load_templates(make_templates(args.data_dir, work))
        (work / "empty.duckdb").unlink(missing_ok=True)
        empty_run_s, empty_context = new_run(work / "empty.duckdb", args.data_dir)
        print(f"empty store: run {empty_run_s:.1f} s, past context after {empty_context:.2f} s",
              file=sys.stderr)
        base = {name: median_of(*command, "--store", str(work / "empty.duckdb"))[:2]
                for name, command in (("runs", ("runs", "--limit", "50", "--json")),
                                      ("memory", ("memory", "show", "--ticker", "NVDA",
                                                  "--json")),
                                      ("stats", ("stats", "--by", "model", "--json")))}
        print("the same commands on a one-run store (process start included): " + ", ".join(
            f"{k} {t:.2f} s / {m:.0f} MB" for k, (t, m) in base.items()), file=sys.stderr)
        results = []
        for n in sizes:
            built, sidecar = work / f"history-{n}.built.duckdb", work / f"history-{n}.json"
            if not (built.exists() and sidecar.exists()):  # else kept from an earlier call
                built.unlink(missing_ok=True)
                print(f"building {n:,} runs ...", file=sys.stderr, flush=True)
                info = build(built, n, runs, resolution)
                sidecar.write_text(json.dumps(info))
            info = json.loads(sidecar.read_text())
            path = work / f"history-{n}.duckdb"  # measured on a copy: a new run is added
            for stale in (path, *path.parent.glob(path.name + ".*")):  # e.g. a killed run's WAL
                stale.unlink(missing_ok=True)
            for source in (built, *built.parent.glob(built.name + ".*")):  # + its anchor
                shutil.copy(source, path.parent / source.name.replace(built.name, path.name))
            print(f"  {info['events']:,} events in {info['build_s']:.0f} s; rows "
                  f"{info['rows']}", file=sys.stderr)
            row = measure(path, n, args.data_dir, empty_context)
            row["store_cpu_ms_per_run"] = round(info["cpu_ms_per_run"], 1)
            row["events"] = info["events"]
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        header = ("runs", "run start +s", "runs --limit 50", "memory show", "stats (s / MB)",
                  "verify (s / MB)", "bytes/run", "store CPU ms/run")
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in results:
            print(f"| {r['runs_in_store']:,} | {r['run_start_overhead_s']:.2f} | "
                  f"{r['runs_list_s']:.2f} s | {r['memory_show_s']:.2f} s | "
                  f"{r['stats_s']:.2f} / {r['stats_rss_mb']:.0f} | "
                  f"{r['verify_s']:.1f} / {r['verify_rss_mb']:.0f} | {r['bytes_per_run']:,} | "
                  f"{r['store_cpu_ms_per_run']} |")
        keys = ("runs_in_store", "run_start_overhead_s", "runs_list_s", "memory_show_s",
                "stats_s", "stats_rss_mb", "verify_s", "verify_rss_mb", "bytes_per_run",
                "store_cpu_ms_per_run")
        last = results[-1]
        print(json.dumps({k: round(last[k], 3) if isinstance(last[k], float) else last[k]
                          for k in keys}))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
