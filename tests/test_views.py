"""Read models: the pure row changes, and the recorder's contract on both store backends —
a view built incrementally equals one rebuilt from scratch, row for row, also after a crash
between an append and its projection; a version bump rebuilds a view by itself."""
from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from events import domain as d
from events.config import RunConfig
from events.decisions import PortfolioDecision
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent
from events.memory_store import InMemoryEventStore
from events.rating import Rating
from events.views import NOT_NULL, POSITIONS_TABLE, Insert, Ref, Table, Update, View, \
    ViewRecorder, connection_for, open_views
from projections.memory import MEMORY_STREAM, MEMORY_TYPES, memory_entries, past_context, \
    pending_for
from projections.runs import RUN_SUMMARY_TYPES, summarize_runs
from projections.usage import GROUPS, USAGE_TYPES, usage
from projections.views import CALLS, GROUNDING, MEMORY, RUNS, VIEWS, call_changes, entries_from_rows, \
    memory_changes, run_changes, run_summary, usage_row

TABLES = (RUNS, MEMORY, CALLS)


# ---- synthetic but complete runs ---------------------------------------------------------
def requested(run_id: str, ticker: str, day: dt.date, forked_from: str | None = None):
    config = RunConfig(ticker=ticker, trade_date=day, quick_model="offline/quick",
                       deep_model="offline/deep")
    return NewEvent(d.RunRequested(run_id=run_id, config=config, forked_from=forked_from),
                    "cli")


def call(role: str, model: str = "offline/quick", tokens: int = 100, actor: str = "gateway",
         failed: bool = False):
    if failed:
        return NewEvent(d.LLMCallFailed(turn_id=role, role=role, call_index=0, model=model,
                                        error="boom", attempts=[d.Attempt(number=1, error="x"),
                                                                d.Attempt(number=2, error="y")]),
                        actor)
    return NewEvent(d.LLMCallCompleted(
        turn_id=role, role=role, call_index=0, tier="quick", model=model,
        provider=model.partition("/")[0], messages=[], response_text="ok",
        input_tokens=tokens, output_tokens=tokens // 2, cost_usd=tokens / 1e5,
        latency_ms=float(tokens)), actor)


def decision(rating: str = "Buy", text: str = "because"):
    return NewEvent(d.PortfolioDecisionIssued(
        turn_id="portfolio_manager", output_mode="structured",
        decision=PortfolioDecision(rating=Rating(rating), executive_summary=text,
                                   investment_thesis="thesis")), "role:portfolio_manager")


def outcome(run_id: str, ticker: str, day: dt.date, resolved_on: dt.date, alpha: float = 0.01):
    return [NewEvent(d.OutcomeResolved(run_id=run_id, ticker=ticker, trade_date=day,
                                       rating=Rating.BUY, raw_return=alpha + 0.005,
                                       benchmark="SPY", benchmark_return=0.005, alpha=alpha,
                                       holding_days=5, resolved_on=resolved_on), "coordinator"),
            NewEvent(d.ReflectionRecorded(run_id=run_id, ticker=ticker, trade_date=day,
                                          reflection=f"lesson of {run_id}", model="offline/quick"),
                     "role:reflector")]


def history() -> list[tuple[str, list[NewEvent]]]:
    """Appends, in order: completed, failed, resumed, incomplete and forked runs; decisions
    replaced for the same (ticker, date); outcomes and reflections; failed model calls."""
    D = dt.date
    steps: list[tuple[str, list[NewEvent]]] = []
    for i, (ticker, day) in enumerate([("AAPL", D(2024, 1, 5)), ("NVDA", D(2024, 1, 5)),
                                       ("AAPL", D(2024, 1, 12)), ("MSFT", D(2024, 2, 1))]):
        run = f"r{i}"
        steps += [(run, [requested(run, ticker, day)]),
                  (run, [call("market", tokens=100 + i), call("bull", tokens=50)]),
                  (run, [call("portfolio_manager", "offline/deep", 300), decision("Buy")]),
                  (run, [NewEvent(d.RunCompleted(rating=Rating.BUY), "coordinator")])]
    steps += [(MEMORY_STREAM, outcome("r0", "AAPL", D(2024, 1, 5), D(2024, 1, 12)) +
               [call("reflector")]),
              (MEMORY_STREAM, outcome("r1", "NVDA", D(2024, 1, 5), D(2024, 1, 12), -0.02))]
    # a failed run, then resumed and completed with another decision
    steps += [("r4", [requested("r4", "TSLA", D(2024, 1, 12)), call("market", failed=True)]),
              ("r4", [NewEvent(d.RunFailed(kind="llm", reason="provider down"), "coordinator")]),
              ("r4", [NewEvent(d.RunResumed(), "cli"), call("market"),
                      decision("Sell", "first")]),
              # a second decision on the same (ticker, date) by another run replaces it
              ("r5", [requested("r5", "TSLA", D(2024, 1, 12)), decision("Hold", "second")]),
              ("r4", [NewEvent(d.RunCompleted(rating=Rating.SELL), "coordinator")])]
    # a fork copies calls (not counted) and adds its own decision; an incomplete run
    steps += [("f1", [requested("f1", "AAPL", D(2024, 1, 12), forked_from="r2"),
                      call("market", actor="fork"), call("portfolio_manager", "offline/deep2"),
                      decision("Overweight")]),
              ("r6", [requested("r6", "AAPL", D(2024, 2, 20)), call("market")])]
    # r2 (AAPL 2024-01-12) was replaced by the fork's decision; r3 resolves later
    steps += [(MEMORY_STREAM, outcome("r3", "MSFT", D(2024, 2, 1), D(2024, 2, 8), 0.03))]
    return steps


def fill(store, steps) -> None:
    for stream, events in steps:
        store.append(stream, events)


# ---- the pure part ----------------------------------------------------------------------
def _stored(store, steps):
    fill(store, steps)
    return store.read_all()


def test_row_changes_are_plain_data():
    events = _stored(InMemoryEventStore(), history()[:4])
    req, calls, (pm_call, dec), done = (events[0],), events[1:3], events[3:5], events[5]
    (insert,) = run_changes(req[0])
    assert insert == Insert(RUNS, insert.row) and insert.row["status"] == "incomplete"
    assert insert.row["ticker"] == "AAPL" and insert.row["requested_position"] == 1
    assert run_changes(calls[0]) == []
    (update,) = run_changes(done)
    assert update.where == {"run_id": "r0"} and update.values["status"] == "completed"
    replace_old, set_new = memory_changes(dec)
    assert replace_old.where["ticker"] == Ref(MEMORY, "ticker", {"run_id": "r0"})
    assert replace_old.where["decision"] is NOT_NULL and replace_old.where["resolved_on"] is None
    assert set_new.values["rating"] == "Buy" and set_new.values["decided_position"] == 5
    (row,) = call_changes(pm_call)
    assert row.row["model"] == "offline/deep" and row.row["failed"] is False
    assert row.row["input_tokens"] == 300 and row.row["attempts"] == 1


def test_fork_copies_of_calls_are_not_rows():
    events = _stored(InMemoryEventStore(), [("f", [requested("f", "AAPL", dt.date(2024, 1, 5)),
                                                   call("market", actor="fork")])])
    assert call_changes(events[1]) == []


# ---- the recorder on both backends -------------------------------------------------------
class MemoryBackend:
    """An in-memory store; its read models in a DuckDB ':memory:' connection that outlives
    the recorder (so a "restart" keeps them, as a file would)."""

    def __init__(self):
        import duckdb
        self.store = InMemoryEventStore()
        self.con = duckdb.connect(":memory:")

    def recorder(self, views=VIEWS) -> ViewRecorder:
        rec = ViewRecorder(self.con.cursor(), views)
        rec.catch_up(self.store)
        return rec

    def restart(self, rec: ViewRecorder) -> None:
        rec.close()

    def fresh(self) -> ViewRecorder:
        """A read model rebuilt from scratch, elsewhere."""
        import duckdb
        rec = ViewRecorder(duckdb.connect(":memory:"), VIEWS)
        rec.catch_up(self.store)
        return rec

    def close(self) -> None:
        self.con.close()


class DuckDBBackend:
    def __init__(self, path):
        self.path = path
        self.store = DuckDBEventStore(path)

    def recorder(self, views=VIEWS) -> ViewRecorder:
        return open_views(self.store, views)

    def restart(self, rec: ViewRecorder) -> None:
        rec.close()
        self.store.close()
        self.store = DuckDBEventStore(self.path)

    def fresh(self) -> ViewRecorder:
        import duckdb
        rec = ViewRecorder(duckdb.connect(":memory:"), VIEWS)
        rec.catch_up(self.store)
        return rec

    def close(self) -> None:
        self.store.close()


@pytest.fixture(params=["memory", "duckdb"])
def backend(request, tmp_path):
    b = MemoryBackend() if request.param == "memory" else DuckDBBackend(tmp_path / "ev.duckdb")
    yield b
    b.close()


def rows_of(rec: ViewRecorder) -> dict[str, list[tuple]]:
    return {t: rec.table_rows(t) for t in TABLES}


def append_projected(store, rec: ViewRecorder, steps) -> None:
    """What the store actor does: append, then apply the committed events."""
    for stream, events in steps:
        rec.after_commit(store, store.append(stream, events))


def test_incremental_equals_rebuild_row_for_row(backend):
    rec = backend.recorder()
    append_projected(backend.store, rec, history())
    incremental = rows_of(rec)
    assert rec.positions() == dict.fromkeys((v.name for v in VIEWS),
                                           backend.store.last_position())
    fresh = backend.fresh()
    assert rows_of(fresh) == incremental
    assert {t: len(r) for t, r in incremental.items()} == {RUNS: 8, MEMORY: 8, CALLS: 17}
    read, counts = rec.rebuild(backend.store)
    assert rows_of(rec) == incremental and counts == {RUNS: 8, MEMORY: 8, CALLS: 17,
                                                      GROUNDING: 0}
    assert read == len(backend.store.read_all(
        types=sorted({t for v in VIEWS for t in v.types})))
    fresh.close()
    rec.close()


def test_crash_between_append_and_projection_is_caught_up(backend):
    steps = history()
    rec = backend.recorder()
    append_projected(backend.store, rec, steps[:9])
    for stream, events in steps[9:14]:
        backend.store.append(stream, events)  # committed, but the process died before projecting
    behind = backend.store.last_position()
    assert rec.position() < behind
    backend.restart(rec)
    rec = backend.recorder()  # on open: catch up from the log
    assert rec.position() == behind
    append_projected(backend.store, rec, steps[14:])
    fresh = backend.fresh()
    assert rows_of(rec) == rows_of(fresh)
    # an append whose projection is lost is also caught up by the next commit (a gap)
    backend.store.append("r7", [requested("r7", "NVDA", dt.date(2024, 3, 1))])
    append_projected(backend.store, rec, [("r7", [call("market")])])
    assert rec.position() == backend.store.last_position()
    assert [r[0] for r in rec.table_rows(RUNS)][-1] == "r7"
    fresh.close()
    rec.close()


def test_a_failing_projection_leaves_the_view_where_it_was(backend):
    rec = backend.recorder()
    steps = history()
    append_projected(backend.store, rec, steps[:4])
    before, position = rows_of(rec), rec.position()

    def broken(e):
        if e.type == "RunCompleted":
            raise RuntimeError("bug in a projection")
        return run_changes(e)
    runs = dataclasses.replace(VIEWS[0], changes=broken)
    rec.close() if isinstance(backend, DuckDBBackend) else None
    rec2 = ViewRecorder(connection_for(backend.store) if isinstance(backend, DuckDBBackend)
                        else backend.con.cursor(), (runs, *VIEWS[1:]))
    fill(backend.store, steps[4:8])  # r1's run, whose RunCompleted breaks the projection
    with pytest.raises(RuntimeError):
        rec2.catch_up(backend.store)
    assert rec2.position() == position and rows_of(rec2) == before  # rolled back, whole
    rec2.close()
    rec3 = backend.recorder()
    fresh = backend.fresh()
    assert rows_of(rec3) == rows_of(fresh) and rec3.position() == backend.store.last_position()
    fresh.close()
    rec3.close()


def test_a_new_view_version_is_rebuilt_on_open(backend):
    rec = backend.recorder()
    append_projected(backend.store, rec, history())
    runs_before = rec.table_rows(RUNS)
    backend.restart(rec)
    # version 2 of `runs` keeps only completed runs, in a table of the same name
    v2 = View("runs", 2, [Table(RUNS, [("run_id", "VARCHAR"), ("rating", "VARCHAR")])],
              ("RunCompleted",), lambda e: [Insert(RUNS, {
                  "run_id": e.stream, "rating": e.payload.rating.value})],
              {"done": f"SELECT * FROM {RUNS} ORDER BY run_id"})
    rec = backend.recorder((v2, *VIEWS[1:]))
    assert rec.positions()["runs"] == backend.store.last_position()
    assert rec.query("done") == [{"run_id": r, "rating": g} for r, g in (
        ("r0", "Buy"), ("r1", "Buy"), ("r2", "Buy"), ("r3", "Buy"), ("r4", "Sell"))]
    version = rec._con.execute(f"SELECT version FROM {POSITIONS_TABLE} WHERE name = 'runs'"
                               ).fetchone()[0]
    assert version == 2
    backend.restart(rec)
    rec = backend.recorder()  # back to version 1: rebuilt again, same rows as before
    assert rec.table_rows(RUNS) == runs_before
    rec.close()


def test_a_lagging_view_catches_up_alone_reading_only_its_types(backend):
    """A view added (or rebuilt) in a store whose other views are current reads only the
    events it needs: at 100,000 runs that is the difference between a pass over millions of
    events and a query that finds a few."""
    rec = backend.recorder()
    append_projected(backend.store, rec, history())
    backend.restart(rec)
    v2 = View("runs", 2, [Table(RUNS, [("run_id", "VARCHAR"), ("rating", "VARCHAR")])],
              ("RunCompleted",), lambda e: [Insert(RUNS, {
                  "run_id": e.stream, "rating": e.payload.rating.value})])
    rec = ViewRecorder(connection_for(backend.store) if isinstance(backend, DuckDBBackend)
                       else backend.con.cursor(), (v2, *VIEWS[1:]))
    assert rec.positions()["runs"] == 0 and rec.position() == 0
    read = rec.catch_up(backend.store)
    assert read == len(backend.store.read_all(types=["RunCompleted"])) == 5
    assert set(rec.positions().values()) == {backend.store.last_position()}
    assert len(rec.table_rows(RUNS)) == 5
    rec.close()


def test_catching_up_in_chunks_reports_progress(backend):
    fill(backend.store, history())  # nothing projected yet
    rec = ViewRecorder(connection_for(backend.store) if isinstance(backend, DuckDBBackend)
                       else backend.con.cursor(), VIEWS)
    seen: list[tuple[int, int]] = []
    last = backend.store.last_position()
    read = rec.catch_up(backend.store, chunk=4, progress=lambda p, n: seen.append((p, n)))
    assert read == len(backend.store.read_all(types=sorted({t for v in VIEWS for t in v.types})))
    assert len(seen) >= read // 4 and seen[-1] == (last, last)
    assert [p for p, _ in seen] == sorted(p for p, _ in seen)
    fresh = backend.fresh()
    assert rows_of(rec) == rows_of(fresh) and rec.positions() == dict.fromkeys(
        (v.name for v in VIEWS), last)
    assert rec.catch_up(backend.store) == 0  # nothing left
    fresh.close()
    rec.close()


# ---- the queries answer what the folds answer --------------------------------------------
def test_queries_equal_the_folds(backend):
    rec = backend.recorder()
    append_projected(backend.store, rec, history())
    store = backend.store
    summaries = summarize_runs(store.read_all(types=list(RUN_SUMMARY_TYPES)))
    listed = rec.query("runs", {"ticker": None, "status": None, "limit": 100})
    assert [run_summary(r) for r in listed] == summaries[::-1]  # newest first
    assert [r["run_id"] for r in rec.query("runs", {"ticker": "AAPL", "status": None,
                                                    "limit": 2})] == ["r6", "f1"]
    assert [r["run_id"] for r in rec.query("runs", {"ticker": None, "status": "incomplete",
                                                    "limit": 50})] == ["r6", "f1", "r5"]
    r4 = next(r for r in listed if r["run_id"] == "r4")
    assert (r4["calls"], r4["failed"], r4["status"], r4["rating"]) == (1, 1, "completed", "Sell")
    f1 = next(r for r in listed if r["run_id"] == "f1")
    assert (f1["forked_from"], f1["calls"]) == ("r2", 1)

    entries = memory_entries(store.read_all(types=list(MEMORY_TYPES)))
    assert entries_from_rows(rec.query("memory")) == entries
    assert [m.run_id for m in entries] == ["r0", "r1", "r3", "r5", "f1"]  # r2, r4 replaced
    assert entries_from_rows(rec.query("memory_of_ticker", {"ticker": "AAPL"})) == \
        [m for m in entries if m.ticker == "AAPL"]
    assert entries_from_rows(rec.query("memory_of_runs", {"run_ids": ["r1", "r3", "zz"]})) == \
        [m for m in entries if m.run_id in ("r1", "r3")]
    for ticker, day in [("AAPL", dt.date(2024, 1, 12)), ("AAPL", dt.date(2024, 3, 1)),
                        ("MSFT", dt.date(2024, 2, 8)), ("NVDA", dt.date(2024, 1, 13))]:
        rows = rec.query("past_context", {"ticker": ticker, "trade_date": day})
        assert past_context(entries_from_rows(rows), ticker, day) == \
            past_context(entries, ticker, day)
        assert entries_from_rows(rec.query("pending", {"ticker": ticker, "before": day})) == \
            pending_for(entries, ticker, day)
    text, n = past_context(entries, "AAPL", dt.date(2024, 3, 1))
    assert n == 3 and "lesson of r0" in text  # r0 (AAPL) + r1, r3 from other tickers
    assert entries_from_rows(rec.query("pending_all")) == [m for m in entries if not m.resolved]

    for by in GROUPS:
        expected = usage(store.read_all(types=list(USAGE_TYPES)), by)
        got = [usage_row(r) for r in rec.query(f"stats_by_{by}")]
        assert [dataclasses.replace(r, cost_usd=round(r.cost_usd, 12)) for r in got] == \
            [dataclasses.replace(r, cost_usd=round(r.cost_usd, 12)) for r in expected]
    rec.close()


def test_the_past_context_is_bounded_and_newest_first(backend):
    rec = backend.recorder()
    steps = []
    for i in range(12):
        day = dt.date(2024, 1, 1) + dt.timedelta(days=7 * i)
        ticker = ("AAPL", "MSFT", "NVDA")[i % 3]
        steps += [(f"m{i}", [requested(f"m{i}", ticker, day), decision("Buy", f"d{i}")]),
                  (MEMORY_STREAM, outcome(f"m{i}", ticker, day, day + dt.timedelta(days=7)))]
    append_projected(backend.store, rec, steps)
    day = dt.date(2024, 3, 24)  # m11: decided 03-18, resolved 03-25: not knowable yet
    rows = rec.query("past_context", {"ticker": "AAPL", "trade_date": day})
    assert [(r["run_id"], r["ticker"]) for r in rows] == [
        ("m9", "AAPL"), ("m6", "AAPL"), ("m3", "AAPL"), ("m0", "AAPL"),
        ("m10", "MSFT"), ("m8", "NVDA"), ("m7", "MSFT")]
    entries = memory_entries(backend.store.read_all())
    assert past_context(entries_from_rows(rows), "AAPL", day) == past_context(entries, "AAPL",
                                                                              day)
    rec.close()


def test_update_then_insert_in_one_transaction():
    """No unique constraints: a change list may touch a key and then insert it again."""
    import duckdb
    t = Table("t", [("k", "VARCHAR"), ("v", "INTEGER")], indexes=[("k",)])
    view = View("v", 1, [t], ("RunRequested",), lambda e: [
        Update("t", {"k": e.stream}, {"v": 0}), Insert("t", {"k": e.stream, "v": e.position}),
        Update("t", {"k": e.stream, "v": e.position}, {"v": e.position * 10})])
    store = InMemoryEventStore()
    rec = ViewRecorder(duckdb.connect(":memory:"), [view])
    fill(store, [("a", [requested("a", "AAPL", dt.date(2024, 1, 5))]),
                 ("a", [requested("a", "AAPL", dt.date(2024, 1, 5))])])
    rec.catch_up(store)
    assert rec.table_rows("t") == [("a", 0), ("a", 20)]
