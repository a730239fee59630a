"""The store contract: one suite, run against every backend.

Whatever backend holds the events (in memory for unit tests, a DuckDB file in production, maybe
Postgres one day), appends, reads, versions, idempotency and verification must behave the same;
the actors only ever see this interface. Each test runs once per backend (``store`` fixture).
"""
from __future__ import annotations

import datetime as dt
import json

import duckdb
import pytest

from events.codec import UPCASTERS, EventDecodeError
from events.domain import RunCompleted, TurnAssigned
from events.duckdb_store import DuckDBEventStore
from events.envelope import GENESIS_HASH, NewEvent, RawEvent, chain_hash
from events.memory_store import InMemoryEventStore
from events.rating import Rating
from events.store import AppendRequest, ConcurrencyError, EventStore


class Backend:
    """How to open, reopen and tamper with one kind of store, for the shared tests."""
    name = "?"

    def open(self) -> EventStore: ...

    def reopen(self, store: EventStore) -> EventStore:
        return store

    def inject(self, store: EventStore, rows: list[RawEvent]) -> EventStore:
        """Put rows in behind the store's back (another writer, an old version, a bad row)."""


class MemoryBackend(Backend):
    name = "memory"

    def open(self) -> EventStore:
        return InMemoryEventStore()

    def inject(self, store: EventStore, rows: list[RawEvent]) -> EventStore:
        store._insert(rows)  # the backend primitive, bypassing planning and hashing checks
        store._heads.clear()
        store._position = None
        return store


class DuckDBBackend(Backend):
    name = "duckdb"

    def __init__(self, path):
        self.path = path

    def open(self) -> EventStore:
        return DuckDBEventStore(self.path)

    def reopen(self, store: EventStore) -> EventStore:
        store.close()
        return DuckDBEventStore(self.path)

    def inject(self, store: EventStore, rows: list[RawEvent]) -> EventStore:
        store.close()
        insert_raw(self.path, rows)
        return DuckDBEventStore(self.path)


def insert_raw(path, rows: list[RawEvent]) -> None:
    """Write rows straight into the DuckDB file with SQL, as an intruder or old code would."""
    con = duckdb.connect(str(path))
    try:
        for r in rows:
            con.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        [r.position, r.event_id, r.stream, r.seq, r.type, r.schema_version,
                         r.recorded_at.replace(tzinfo=None), r.actor, r.causation_id,
                         r.idempotency_key, r.prev_hash, r.hash, r.payload_json])
    finally:
        con.close()


def raw_row(stream: str, seq: int, position: int, type_: str, payload: dict | str,
            prev_hash: str = GENESIS_HASH, schema_version: int = 1) -> RawEvent:
    """A row with a correct chain hash, so only its content (not tampering) is under test."""
    payload_json = payload if isinstance(payload, str) else json.dumps(payload)
    at = dt.datetime(2024, 5, 10, 12, 0, tzinfo=dt.UTC)
    event_id = f"raw-{stream}-{seq}"
    digest = chain_hash(prev_hash, stream, seq, event_id, type_, schema_version, at, "test",
                        None, None, payload_json)
    return RawEvent(position, event_id, stream, seq, type_, schema_version, at, "test", None,
                    None, prev_hash, digest, payload_json)


@pytest.fixture(params=["memory", "duckdb"])
def backend(request, tmp_path) -> Backend:
    return MemoryBackend() if request.param == "memory" else DuckDBBackend(tmp_path / "ev.duckdb")


@pytest.fixture
def store(backend):
    s = backend.open()
    yield s
    s.close()


def turns(*names: str, role: str = "bull") -> list[NewEvent]:
    return [NewEvent(TurnAssigned(turn_id=n, role=role), actor="coordinator", causation_id="cmd")
            for n in names]


# ---- empty store ---------------------------------------------------------------------------
def test_empty_store_has_nothing(store):
    assert store.version("run-1") == 0
    assert store.read_stream("run-1") == []
    assert store.read_all() == []
    assert store.list_streams() == []
    assert store.last_position() == 0
    result = store.verify("run-1")
    assert (result.ok, result.checked, result.first_bad_seq) == (True, 0, None)


# ---- append / read -------------------------------------------------------------------------
def test_append_numbers_streams_gapless_and_positions_globally(store):
    a1 = store.append("a", turns("t1", "t2", "t3"))
    b1 = store.append("b", turns("u1", "u2"))
    a2 = store.append("a", turns("t4", "t5"))

    assert [e.seq for e in a1 + a2] == [1, 2, 3, 4, 5]
    assert [e.seq for e in b1] == [1, 2]
    assert [e.position for e in a1 + b1 + a2] == [1, 2, 3, 4, 5, 6, 7]
    assert store.version("a") == 5 and store.version("b") == 2
    assert store.last_position() == 7
    assert len({e.event_id for e in a1 + b1 + a2}) == 7


def test_read_back_equals_what_append_returned(store):
    written = store.append("a", turns("t1", "t2")) + store.append("b", turns("u1"))
    assert store.read_stream("a") + store.read_stream("b") == \
        [written[0], written[1], written[2]]
    assert store.read_all() == written
    first = written[0]
    assert first.payload == TurnAssigned(turn_id="t1", role="bull")
    assert (first.actor, first.causation_id, first.type) == ("coordinator", "cmd", "TurnAssigned")
    assert first.recorded_at.tzinfo is not None
    assert first.recorded_at.utcoffset() == dt.timedelta(0)


def test_hash_chain_links_each_event_to_the_previous(store):
    events = store.append("a", turns("t1", "t2", "t3"))
    assert events[0].prev_hash == GENESIS_HASH
    assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
    assert len({e.hash for e in events}) == 3


def test_read_stream_and_read_all_ranges(store):
    store.append("a", turns("t1", "t2", "t3", "t4"))
    store.append("b", turns("u1", "u2"))
    assert [e.seq for e in store.read_stream("a", from_seq=2, to_seq=3)] == [2, 3]
    assert [e.seq for e in store.read_stream("a", from_seq=4)] == [4]
    assert store.read_stream("a", from_seq=5) == []
    assert [e.position for e in store.read_all(after_position=3, limit=2)] == [4, 5]
    assert [e.position for e in store.read_all(after_position=5)] == [6]
    assert store.read_all(after_position=6) == []


def test_rejects_empty_batch_and_bad_stream_names(store):
    with pytest.raises(ValueError, match="empty batch"):
        store.append("a", [])
    for bad in ("", "x" * 201):
        with pytest.raises(ValueError, match="stream name"):
            store.append(bad, turns("t1"))
    assert store.last_position() == 0


# ---- optimistic concurrency ----------------------------------------------------------------
def test_wrong_expected_version_raises_and_writes_nothing(store):
    store.append("a", turns("t1", "t2"), expected_version=0)
    with pytest.raises(ConcurrencyError) as err:
        store.append("a", turns("t3"), expected_version=1)
    assert (err.value.stream, err.value.expected, err.value.actual) == ("a", 1, 2)
    assert "version 2" in str(err.value)
    with pytest.raises(ConcurrencyError):
        store.append("new", turns("n1"), expected_version=3)
    assert store.version("a") == 2 and store.version("new") == 0
    assert store.last_position() == 2

    ok = store.append("a", turns("t3"), expected_version=2)
    assert [(e.seq, e.position) for e in ok] == [(3, 3)]


# ---- idempotency ---------------------------------------------------------------------------
def test_same_idempotency_key_returns_the_original_events(store):
    first = store.append("a", turns("t1", "t2"), idempotency_key="turn-1")
    store.append("b", turns("u1"))
    again = store.append("a", turns("t1", "t2"), idempotency_key="turn-1")
    assert again == first
    assert [(e.event_id, e.position, e.seq) for e in again] == \
        [(e.event_id, e.position, e.seq) for e in first]
    assert store.version("a") == 2 and store.last_position() == 3

    # a retry of a call that did land is harmless even if its expected version is stale now
    assert store.append("a", turns("t1"), expected_version=0, idempotency_key="turn-1") == first
    # keys are per stream, and a new key writes
    other = store.append("b", turns("t1"), idempotency_key="turn-1")
    assert [e.seq for e in other] == [2]
    assert [e.seq for e in store.append("a", turns("t3"), idempotency_key="turn-2")] == [3]
    assert store.last_position() == 5


def test_idempotency_within_one_group_commit(store):
    results = store.append_batches([
        AppendRequest("a", turns("t1", "t2"), idempotency_key="k"),
        AppendRequest("b", turns("u1")),
        AppendRequest("a", turns("t1", "t2"), idempotency_key="k"),
    ])
    assert results[2] == results[0]
    assert [e.position for e in results[0]] == [1, 2]
    assert store.version("a") == 2 and store.last_position() == 3
    assert store.read_stream("a") == results[0]


# ---- atomic batches ------------------------------------------------------------------------
def test_batch_failing_half_way_writes_nothing(store):
    store.append("a", turns("t1"))
    bad = turns("t2", "t3") + [NewEvent({"type": "TurnAssigned"}, actor="x")] + turns("t4")
    with pytest.raises(TypeError, match="not a domain event"):
        store.append("a", bad)
    assert store.version("a") == 1 and store.last_position() == 1
    assert [e.seq for e in store.read_stream("a")] == [1]

    after = store.append("a", turns("t2"))
    assert [(e.seq, e.position) for e in after] == [(2, 2)]
    assert store.verify("a").ok


# ---- group commit --------------------------------------------------------------------------
def test_group_commit_isolates_a_conflicting_request(store):
    store.append("b", turns("u1"))
    results = store.append_batches([
        AppendRequest("a", turns("t1", "t2"), expected_version=0),
        AppendRequest("b", turns("u2"), expected_version=0),  # b is at 1: conflict
        AppendRequest("c", turns("v1")),
        AppendRequest("a", turns("t3"), expected_version=2),  # sees the first request's events
    ])
    assert isinstance(results[1], ConcurrencyError) and results[1].actual == 1
    assert [(e.stream, e.seq, e.position) for e in results[0] + results[2] + results[3]] == \
        [("a", 1, 2), ("a", 2, 3), ("c", 1, 4), ("a", 3, 5)]
    assert store.version("b") == 1
    assert [e.payload.turn_id for e in store.read_stream("a")] == ["t1", "t2", "t3"]
    assert all(store.verify(s).ok for s in ("a", "b", "c"))


def test_group_commit_reports_bad_payload_only_to_its_caller(store):
    results = store.append_batches([
        AppendRequest("a", turns("t1")),
        AppendRequest("b", [NewEvent("not an event", actor="x")]),
    ])
    assert [e.seq for e in results[0]] == [1]
    assert isinstance(results[1], TypeError)
    assert store.version("b") == 0


# ---- list_streams / verify -----------------------------------------------------------------
def test_list_streams_reports_versions_times_and_types(store, backend):
    store.append("run-1", turns("t1", "t2"))
    store.append("memory", turns("m1"))
    store.append("run-1", [NewEvent(RunCompleted(rating=Rating.BUY), actor="coordinator")])
    store = backend.reopen(store)

    infos = {i.stream: i for i in store.list_streams()}
    assert [i.stream for i in store.list_streams()] == ["run-1", "memory"]
    run = infos["run-1"]
    events = store.read_stream("run-1")
    assert (run.version, run.first_type, run.last_type) == (3, "TurnAssigned", "RunCompleted")
    assert (run.first_at, run.last_at) == (events[0].recorded_at, events[-1].recorded_at)
    assert run.first_at < run.last_at
    assert (infos["memory"].version, infos["memory"].first_type) == (1, "TurnAssigned")
    store.close()


def test_verify_passes_on_an_honest_stream(store):
    for i in range(5):
        store.append("a", turns(f"t{i}a", f"t{i}b"))
    result = store.verify("a")
    assert (result.ok, result.checked, result.problem) == (True, 10, None)


# ---- decoding on read ----------------------------------------------------------------------
@pytest.mark.parametrize("type_,payload,expected", [
    ("TurnTaken", {"type": "TurnTaken", "turn_id": "t"}, "unknown event type"),
    ("TurnAssigned", {"type": "TurnAssigned", "turn_id": "t", "role": "cfo"},
     "role: Input should be"),
    ("TurnAssigned", "{not json", "payload is not JSON"),
])
def test_a_bad_stored_row_fails_loudly_naming_type_and_place(backend, type_, payload, expected):
    store = backend.open()
    store.append("run-9", turns("t1"))
    store = backend.inject(store, [raw_row("run-9", 2, 2, type_, payload,
                                           prev_hash=store.read_stream("run-9")[0].hash)])
    for read in (lambda: store.read_stream("run-9"), store.read_all):
        with pytest.raises(EventDecodeError) as err:
            read()
        assert f"{type_!r} at run-9#2" in str(err.value)
        assert expected in str(err.value)
    assert [e.seq for e in store.read_stream("run-9", to_seq=1)] == [1]  # the rest still reads
    assert store.verify("run-9").ok  # the chain is intact: it's the content that is unknown
    store.close()


def test_old_schema_version_is_upcast_on_read_and_never_rewritten(backend, monkeypatch):
    """Version 0 of TurnAssigned called the field ``turn`` and had no round."""
    def v0_to_v1(data: dict) -> dict:
        data = dict(data)
        data["turn_id"] = data.pop("turn")
        data.setdefault("round", 1)
        return data

    monkeypatch.setitem(UPCASTERS, ("TurnAssigned", 0), v0_to_v1)
    old = json.dumps({"type": "TurnAssigned", "turn": "t-old", "role": "bear"})
    store = backend.inject(backend.open(), [raw_row("run-0", 1, 1, "TurnAssigned", old,
                                                    schema_version=0)])
    (event,) = store.read_stream("run-0")
    assert event.payload == TurnAssigned(turn_id="t-old", role="bear", round=1)
    assert event.schema_version == 0  # the envelope tells what was stored
    (row,) = store._raw_stream("run-0", 1, None)
    assert (row.schema_version, row.payload_json) == (0, old)
    assert store.verify("run-0").ok

    # appends continue after the injected row, chained to it
    (new,) = store.append("run-0", turns("t2"))
    assert (new.seq, new.position, new.prev_hash) == (2, 2, row.hash)
    assert store.verify("run-0").ok
    store.close()


def test_verify_all_covers_every_stream_and_the_positions(store):
    for stream in ("run-a", "run-b", "memory"):
        store.append(stream, turns(f"{stream}-1", f"{stream}-2"))
    results = store.verify_all()
    assert [r.stream for r in results] == ["run-a", "run-b", "memory", "(positions)"]
    assert all(r.ok for r in results) and results[-1].checked == store.last_position() == 6
