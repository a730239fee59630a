"""The store contract: one suite, run against every backend.

Whatever backend holds the events (in memory for unit tests, a DuckDB file in production, maybe
Postgres one day), appends, reads, versions, idempotency and verification must behave the same;
the actors only ever see this interface. Each test runs once per backend (``store`` fixture).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json

import duckdb
import pytest

from events.codec import UPCASTERS, EventDecodeError
from events.domain import RunCompleted, TurnAssigned
from events.duckdb_store import DuckDBEventStore
from events.envelope import GENESIS_HASH, NewEvent, RawEvent, chain_hash, keyed_chain_hash
from events.memory_store import InMemoryEventStore
from events.rating import Rating
from events.store import KEY_MISMATCH, AppendRequest, ConcurrencyError, EventStore, StoreError


TEST_KEY = b"contract-test-chain-key-0123456789"


class Backend:
    """How to open, reopen and tamper with one kind of store, for the shared tests."""
    name = "?"

    def open(self, key: bytes = TEST_KEY) -> EventStore: ...

    def reopen(self, store: EventStore) -> EventStore:
        return store

    def inject(self, store: EventStore, rows: list[RawEvent]) -> EventStore:
        """Put rows in behind the store's back (another writer, an old version, a bad row)."""

    def delete(self, store: EventStore, positions: list[int]) -> EventStore:
        """Remove rows behind the store's back."""

    def swap_positions(self, store: EventStore, a: int, b: int) -> EventStore: ...

    def edit_body(self, store: EventStore, body_id: str, text: str) -> EventStore: ...

    def drop_anchor(self, store: EventStore) -> EventStore: ...


def _forget(store: EventStore) -> EventStore:
    store._heads.clear()
    store._position = None
    store._count = None
    return store


class MemoryBackend(Backend):
    name = "memory"

    def open(self, key: bytes = TEST_KEY) -> EventStore:
        return InMemoryEventStore(chain_key=key)

    def inject(self, store: EventStore, rows: list[RawEvent]) -> EventStore:
        store._insert(rows)  # the backend primitive, bypassing planning and hashing checks
        return _forget(store)

    def delete(self, store: EventStore, positions: list[int]) -> EventStore:
        store._rows = [r for r in store._rows if r.position not in positions]
        for stream, rows in store._by_stream.items():
            store._by_stream[stream] = [r for r in rows if r.position not in positions]
        return _forget(store)

    def swap_positions(self, store: EventStore, a: int, b: int) -> EventStore:
        moved = {a: b, b: a}
        rows = [dataclasses.replace(r, position=moved.get(r.position, r.position))
                for r in store._rows]
        store._rows, store._by_stream = [], type(store._by_stream)(list)
        store._insert(rows)
        return _forget(store)

    def edit_body(self, store: EventStore, body_id: str, text: str) -> EventStore:
        store._bodies[body_id] = text
        return store

    def drop_anchor(self, store: EventStore) -> EventStore:
        store._anchor = None
        return store


class DuckDBBackend(Backend):
    name = "duckdb"

    def __init__(self, path):
        self.path = path

    def open(self, key: bytes = TEST_KEY) -> EventStore:
        self.key = key
        return DuckDBEventStore(self.path, chain_key=key)

    def reopen(self, store: EventStore) -> EventStore:
        store.close()
        return DuckDBEventStore(self.path, chain_key=self.key)

    def _sql(self, store: EventStore, sql: str, params=()) -> EventStore:
        store.close()
        con = duckdb.connect(str(self.path))
        try:
            con.execute(sql, params)
        finally:
            con.close()
        return DuckDBEventStore(self.path, chain_key=self.key)

    def inject(self, store: EventStore, rows: list[RawEvent]) -> EventStore:
        store.close()
        insert_raw(self.path, rows)
        return DuckDBEventStore(self.path, chain_key=self.key)

    def delete(self, store: EventStore, positions: list[int]) -> EventStore:
        return self._sql(store, "DELETE FROM events WHERE position IN (SELECT unnest(?))",
                         [positions])

    def swap_positions(self, store: EventStore, a: int, b: int) -> EventStore:
        store.close()
        con = duckdb.connect(str(self.path))
        try:  # a primary key cannot be updated in place: take the rows out and back in
            rows = con.execute("SELECT * FROM events WHERE position IN (?, ?)", [a, b]).fetchall()
            con.execute("DELETE FROM events WHERE position IN (?, ?)", [a, b])
            for row in rows:
                con.execute(f"INSERT INTO events VALUES ({','.join('?' * len(row))})",
                            [b if row[0] == a else a, *row[1:]])
        finally:
            con.close()
        return DuckDBEventStore(self.path, chain_key=self.key)

    def edit_body(self, store: EventStore, body_id: str, text: str) -> EventStore:
        store.close()
        con = duckdb.connect(str(self.path))
        try:
            con.execute("DELETE FROM bodies WHERE id = ?", [body_id])
            con.execute("INSERT INTO bodies (id, text) VALUES (?, ?)", [body_id, text])
        finally:
            con.close()
        return DuckDBEventStore(self.path, chain_key=self.key)

    def drop_anchor(self, store: EventStore) -> EventStore:
        store.anchor_path.unlink()
        return store


def insert_raw(path, rows: list[RawEvent]) -> None:
    """Write rows straight into the DuckDB file with SQL, as an intruder or old code would."""
    con = duckdb.connect(str(path))
    try:
        for r in rows:
            con.execute("INSERT INTO events (position, event_id, stream, seq, type, "
                        "schema_version, recorded_at, actor, causation_id, idempotency_key, "
                        "prev_hash, hash, payload, chain) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        [r.position, r.event_id, r.stream, r.seq, r.type, r.schema_version,
                         r.recorded_at.replace(tzinfo=None), r.actor, r.causation_id,
                         r.idempotency_key, r.prev_hash, r.hash, r.payload_json, r.chain])
    finally:
        con.close()


def raw_row(stream: str, seq: int, position: int, type_: str, payload: dict | str,
            prev_hash: str = GENESIS_HASH, schema_version: int = 1,
            key: bytes | None = None) -> RawEvent:
    """A row with a correct chain hash, so only its content (not tampering) is under test:
    unkeyed (chain 1, as stores written before keyed chains hold) or keyed with ``key``."""
    payload_json = payload if isinstance(payload, str) else json.dumps(payload)
    at = dt.datetime(2024, 5, 10, 12, 0, tzinfo=dt.UTC)
    event_id = f"raw-{stream}-{seq}"
    if key is None:
        digest = chain_hash(prev_hash, stream, seq, event_id, type_, schema_version, at, "test",
                            None, None, payload_json)
    else:
        digest = keyed_chain_hash(key, prev_hash, position, stream, seq, event_id, type_,
                                  schema_version, at, "test", None, None, payload_json)
    return RawEvent(position, event_id, stream, seq, type_, schema_version, at, "test", None,
                    None, prev_hash, digest, payload_json, chain=1 if key is None else 2)


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


def test_a_failed_group_commit_still_answers_retried_appends_that_were_stored(store,
                                                                             monkeypatch):
    first = store.append("a", turns("t1"), idempotency_key="k1")

    def disk_gone(*args, **kwargs):
        raise OSError("disk gone")
    monkeypatch.setattr(store, "_insert", disk_gone)
    results = store.append_batches([
        AppendRequest("a", turns("t1"), idempotency_key="k1"),  # a retry: already stored
        AppendRequest("b", turns("u1"), idempotency_key="k2"),  # new: this commit fails
        AppendRequest("b", turns("u1"), idempotency_key="k2"),  # its twin in the same batch
    ])
    assert [e.event_id for e in results[0]] == [e.event_id for e in first]
    assert isinstance(results[1], OSError) and isinstance(results[2], OSError)
    monkeypatch.undo()
    assert store.version("b") == 0 and store.version("a") == 1
    assert store.append("b", turns("u1"), idempotency_key="k2")[0].seq == 1  # and it heals


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
    store = backend.inject(store, [raw_row("run-9", 2, 2, type_, payload, key=TEST_KEY,
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
    report = store.verify_all()
    assert report.ok and report.problems == []
    assert (report.streams, report.events, report.last_position) == (3, 6, 6)
    assert report.anchor == "ok"


def test_verify_all_reads_in_bounded_chunks_and_reports_progress(store, monkeypatch):
    import events.store as store_module
    monkeypatch.setattr(store_module, "VERIFY_CHUNK", 4)
    for i in range(5):
        store.append(f"run-{i % 2}", turns(f"t{i}a", f"t{i}b"))
    seen, windows = [], []
    raw_range = store._raw_range
    monkeypatch.setattr(store, "_raw_range", lambda after, upto: (
        windows.append(upto - after), raw_range(after, upto))[1])
    monkeypatch.setattr(store, "_raw_all", None)  # never the whole store in one read
    report = store.verify_all(progress=lambda done, total: seen.append((done, total)))
    assert report.ok and report.events == 10
    assert windows and max(windows) <= 4
    assert seen[0] == (0, 10) and seen[-1] == (10, 10) and len(seen) >= 3


# ---- keyed chain, anchor, tampering (issue 14.5) -------------------------------------------
def fill(store) -> list:
    written = []
    for batch in range(3):
        for stream in ("run-a", "run-b"):
            written += store.append(stream, turns(f"{stream}-{batch}-1", f"{stream}-{batch}-2"))
    return written


def problems(report) -> dict[str, str]:
    return {p.stream: p.problem for p in report.problems}


def test_new_events_are_keyed_and_cover_their_position(store):
    written = fill(store)
    assert {e.chain for e in written} == {2}
    raw = store._raw_all(0, None)
    assert all(r.expected_hash(TEST_KEY) == r.hash for r in raw)
    assert all(r.expected_hash(b"another key") != r.hash for r in raw)
    moved = dataclasses.replace(raw[0], position=99)
    assert moved.expected_hash(TEST_KEY) != raw[0].hash


def test_forged_append_with_a_correct_looking_unkeyed_hash_is_caught(store, backend):
    fill(store)
    tail = store.read_stream("run-a")[-1]
    forged = raw_row("run-a", tail.seq + 1, store.last_position() + 1, "TurnAssigned",
                     {"type": "TurnAssigned", "turn_id": "forged", "role": "bull", "round": 1},
                     prev_hash=tail.hash)  # plain SHA-256: what anyone can compute
    assert forged.expected_hash() == forged.hash
    store = backend.inject(store, [forged])
    result = store.verify("run-a")
    assert (result.ok, result.first_bad_seq) == (False, forged.seq)
    assert "unkeyed hash after keyed events began: forged" in result.problem
    assert "forged" in problems(store.verify_all())["run-a"]
    # a keyed hash made with another key is no better
    store = backend.delete(store, [forged.position])
    other = raw_row("run-a", tail.seq + 1, store.last_position() + 1, "TurnAssigned",
                    {"type": "TurnAssigned", "turn_id": "forged", "role": "bull", "round": 1},
                    prev_hash=tail.hash, key=b"the intruder's own key")
    store = backend.inject(store, [other])
    assert "was altered" in store.verify("run-a").problem
    assert "was altered" in problems(store.verify_all())["run-a"]
    store.close()


def test_forged_new_stream_with_unkeyed_hashes_is_caught(store, backend):
    """An intruder's whole new stream, chained with plain SHA-256 as an old store would be: the
    store recorded (signed) where keyed events began, so it cannot pass for old rows."""
    fill(store)
    end = store.last_position()
    forged = raw_row("run-x", 1, end + 1, "TurnAssigned",
                     {"type": "TurnAssigned", "turn_id": "x", "role": "bull", "round": 1})
    store = backend.inject(store, [forged])
    assert "forged" in store.verify("run-x").problem
    assert "forged" in problems(store.verify_all())["run-x"]
    store.close()


def test_rewritten_suffix_of_a_stream_is_caught(store, backend):
    fill(store)
    events = store._raw_stream("run-b", 1, None)
    keep = events[:3]
    store = backend.delete(store, [e.position for e in events[3:]])
    prev, rows = keep[-1].hash, []
    for e in events[3:]:  # same positions, new content, a chain recomputed without the key
        row = raw_row("run-b", e.seq, e.position, "TurnAssigned",
                      {"type": "TurnAssigned", "turn_id": f"rewritten-{e.seq}", "role": "bear",
                       "round": 1}, prev_hash=prev, key=b"guessed key")
        rows.append(row)
        prev = row.hash
    store = backend.inject(store, rows)
    result = store.verify("run-b")
    assert (result.ok, result.first_bad_seq) == (False, 4)
    report = store.verify_all()
    assert set(problems(report)) >= {"run-b"} and "seq 4" in problems(report)["run-b"]
    store.close()


def test_swapped_positions_are_caught(store, backend):
    written = fill(store)
    a, b = written[2], written[3]  # run-b seq 1 and run-b seq 2? no: run-a batch 0 is 1-2
    assert (a.stream, b.stream) == ("run-b", "run-b")
    c = written[4]  # run-a seq 3: swap two events of different streams
    store = backend.swap_positions(store, b.position, c.position)
    report = store.verify_all()
    assert not report.ok
    assert "altered" in problems(report)["run-a"] and "altered" in problems(report)["run-b"]
    store.close()


def test_deleting_the_newest_events_of_the_newest_stream_is_caught_by_the_anchor(store, backend):
    fill(store)
    assert store.verify_all().anchor == "ok"
    end = store.last_position()
    store = backend.delete(store, [end - 1, end])
    assert store.verify("run-b").ok  # the chain alone cannot see it
    report = store.verify_all()
    assert not report.ok and report.anchor == "broken"
    assert f"the store ends at {end - 2}: its newest events were removed" in \
        problems(report)["(anchor)"]
    store.close()


def test_exported_anchor_catches_a_cut_even_when_the_anchor_is_gone(store, backend):
    fill(store)
    exported = store.head_anchor()
    assert store.verify_all(against=exported).ok
    end = store.last_position()
    store = backend.delete(store, [end])
    store = backend.drop_anchor(store)
    report = store.verify_all(against=exported)
    assert "newest events were removed" in problems(report)["(exported anchor)"]
    assert "is missing" in problems(report)["(anchor)"]
    forged = dict(exported, position=end - 1, count=end - 1,
                  hash=store._raw_all(end - 2, 1)[0].hash)  # re-pointed without the key
    assert "signature is invalid" in problems(store.verify_all(against=forged))[
        "(exported anchor)"]
    store.close()


def test_wrong_key_says_so_once_instead_of_altered_everywhere(store, backend):
    fill(store)
    store.close()
    other = backend.open(key=b"not the key this store was written with")
    if backend.name == "memory":  # nothing to reopen: the same rows under another key
        other._rows, other._by_stream, other._meta = store._rows, store._by_stream, store._meta
        other._anchor = store._anchor
    report = other.verify_all()
    assert [(p.stream, p.problem) for p in report.problems] == [("(chain key)", KEY_MISMATCH)]
    assert other.verify("run-a").problem == KEY_MISMATCH
    with pytest.raises(StoreError, match="chain key does not match"):
        other.append("run-a", turns("late"))
    other.close()


def test_old_format_rows_still_verify_and_new_ones_chain_on(backend):
    """A store written before keyed chains: unkeyed SHA-256 rows (chain 1), no anchor."""
    store = backend.open()
    prev, rows = GENESIS_HASH, []
    for seq in range(1, 4):
        row = raw_row("old-run", seq, seq, "TurnAssigned",
                      {"type": "TurnAssigned", "turn_id": f"o{seq}", "role": "bull", "round": 1},
                      prev_hash=prev)
        rows.append(row)
        prev = row.hash
    store = backend.inject(store, rows)
    assert store.verify("old-run").ok
    report = store.verify_all()
    assert report.ok and report.anchor == "none"
    (new,) = store.append("old-run", turns("n4"))
    assert (new.seq, new.chain, new.prev_hash) == (4, 2, prev)
    assert store.verify("old-run").ok and store.verify_all().ok
    assert [e.chain for e in store.read_stream("old-run")] == [1, 1, 1, 2]
    # old rows are read back unchanged (no lean decoding for chain 1)
    assert store._raw_stream("old-run", 1, 1)[0].payload_json == rows[0].payload_json
    store.close()


# ---- lean events (issue 9.4) ---------------------------------------------------------------
SYSTEM = "You are the bull researcher. " * 20
REPORT = "\n\n".join(f"Paragraph {i}: " + "revenue grew strongly and margins widened. " * 4
                      for i in range(6))


def llm_call(i: int, extra: str = "", structured: dict | None = None) -> NewEvent:
    from events.domain import LLMCallCompleted
    from events.records import Message
    messages = [Message(role="system", content=SYSTEM), Message(role="user", content=REPORT)]
    messages += [Message(role="assistant", content=f"answer {j}: " + "x" * 300)
                 for j in range(i)]
    return NewEvent(LLMCallCompleted(
        turn_id="t1", role="bull", call_index=i, tier="quick", model="m", provider="p",
        messages=messages, response_text=f"answer {i}: " + "x" * 300 + extra,
        structured=structured), actor="gateway")


def stored_bytes(store) -> int:
    raw = sum(len(r.payload_json.encode()) for r in store._raw_all(0, None))
    ids = list(store._known_bodies)
    return raw + sum(len(t.encode()) for t in store._load_bodies(ids).values())


def test_lean_round_trip_returns_the_exact_payloads_and_stores_less(store, backend):
    tricky = {"$text": ["b:AAAAAAAAAAAAAAAAAAAAAA"], "$$x": 1, "nested": [{"$y": "z" * 300}]}
    new = [llm_call(i) for i in range(4)] + [llm_call(4, "\n\n\n\nend", structured=tricky)]
    written = store.append("run-l", new)
    assert [e.payload for e in written] == [n.payload for n in new]
    store = backend.reopen(store)
    assert store.read_stream("run-l") == written
    assert store.read_all() == written
    assert store.read_stream("run-l")[-1].payload.structured == tricky
    full = sum(len(n.payload.model_dump_json().encode()) for n in new)
    assert stored_bytes(store) < full / 2
    assert '"$text"' in store._raw_stream("run-l", 2, 2)[0].payload_json
    assert store.verify("run-l").ok and store.verify_all().ok
    # an idempotent retry returns the full payloads too
    again = store.append("run-k", new[:2], idempotency_key="k")
    assert store.append("run-k", new[:2], idempotency_key="k") == again
    assert [e.payload for e in again] == [n.payload for n in new[:2]]
    store.close()


def test_body_tampering_is_caught(store, backend):
    store.append("run-l", [llm_call(1)])
    raw = store._raw_stream("run-l", 1, 1)[0].payload_json
    from events.bodies import body_id, refs_of
    target = body_id(SYSTEM)  # the system prompt: one paragraph, one body
    assert target in refs_of(raw)
    store = backend.edit_body(store, target, SYSTEM.replace("bull", "bear"))
    assert "bear researcher" in store.read_stream("run-l")[0].payload.messages[0].content
    result = store.verify("run-l")
    assert not result.ok and f"body {target}" in result.problem and "altered" in result.problem
    assert "altered" in problems(store.verify_all())["run-l"]
    store.close()


# ---- incremental verify (issue 9.3) --------------------------------------------------------
def test_incremental_verify_checks_only_what_is_new_and_a_full_one_still_sees_old_edits(
        store, backend):
    fill(store)
    first = store.verify_all()
    assert first.ok and first.checkpoint == 12
    store.append("run-a", turns("late-1"))
    store.append("run-c", turns("c-1", "c-2"))
    inc = store.verify_all(incremental=True)
    assert inc.ok and (inc.from_position, inc.events, inc.checkpoint) == (12, 3, 15)
    # a forged event after the checkpoint is caught by the incremental verify
    tail = store.read_stream("run-a")[-1]
    store = backend.inject(store, [raw_row("run-a", tail.seq + 1, 16, "TurnAssigned",
                                           {"type": "TurnAssigned", "turn_id": "f",
                                            "role": "bull", "round": 1}, prev_hash=tail.hash)])
    inc = store.verify_all(incremental=True)
    assert inc.from_position == 15 and "forged" in problems(inc)["run-a"]
    store = backend.delete(store, [16])
    assert store.verify_all(incremental=True).ok
    # an edit before the checkpoint: incremental does not look there, a full verify does
    target = store._raw_all(3, 1)[0]
    store = backend.delete(store, [target.position])
    store = backend.inject(store, [dataclasses.replace(target, actor="mallory")])
    assert store.verify_all(incremental=True).ok
    assert not store.verify_all().ok
    store.close()


def test_forged_checkpoint_is_refused(store, backend):
    fill(store)
    store.verify_all()
    point = store._load_checkpoint()
    store._save_checkpoint(dict(point, position=point["position"] + 5,
                                verified_at=dt.datetime(2100, 1, 1)))
    report = store.verify_all(incremental=True)
    assert report.from_position == 0 and "signature is invalid" in problems(report)[
        "(checkpoint)"]
    store.close()
