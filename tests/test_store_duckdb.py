"""DuckDB-only behaviour: what survives a reopen, what a failed transaction leaves behind, and
what ``verify`` sees when someone edits the file by hand (the audit of ``ta-actors replay``)."""
from __future__ import annotations

import duckdb
import pytest

from events.domain import AnalystReportSubmitted, TurnAssigned
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent
from events.store import AppendRequest, StoreError

from test_store_contract import TEST_KEY, insert_raw, raw_row  # noqa: E402 - tests/ on sys.path


def turns(*names: str) -> list[NewEvent]:
    return [NewEvent(TurnAssigned(turn_id=n, role="bear"), actor="coordinator") for n in names]


def rows(path, sql: str, params=()) -> list[tuple]:
    con = duckdb.connect(str(path))
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


@pytest.fixture(autouse=True)
def chain_key(monkeypatch):
    """Every store of this module is keyed with the contract tests' key (text form)."""
    monkeypatch.setenv("TA_ACTORS_CHAIN_KEY", TEST_KEY.decode())


@pytest.fixture
def path(tmp_path):
    return tmp_path / "store" / "events.duckdb"  # parent folder created by the store


@pytest.fixture
def filled(path):
    """Three streams, ten events each, in batches of two; closed again."""
    with DuckDBEventStore(path) as store:
        for batch in range(5):
            for stream in ("run-a", "run-b", "memory"):
                store.append(stream, turns(f"{stream}-{batch}-1", f"{stream}-{batch}-2"))
    return path


def test_reopen_keeps_everything_and_appends_continue_gapless(filled):
    with DuckDBEventStore(filled) as store:
        before = {s: store.read_stream(s) for s in ("run-a", "run-b", "memory")}
        infos = store.list_streams()
    with DuckDBEventStore(filled) as store:
        assert {s: store.read_stream(s) for s in before} == before
        assert store.list_streams() == infos
        assert [store.version(s) for s in before] == [10, 10, 10]
        assert store.last_position() == 30
        assert all(store.verify(s).ok for s in before)
        (new,) = store.append("run-a", turns("late"))
        assert (new.seq, new.position, new.prev_hash) == (11, 31, before["run-a"][-1].hash)
        assert store.verify("run-a").ok


def test_read_only_reads_and_refuses_to_write(filled, tmp_path):
    with DuckDBEventStore(filled, read_only=True) as store:
        assert store.version("run-b") == 10
        with pytest.raises(StoreError, match="read-only"):
            store.append("run-b", turns("x"))
    with pytest.raises(StoreError, match="no event store"):
        DuckDBEventStore(tmp_path / "missing.duckdb", read_only=True)


def test_read_only_while_this_process_writes_is_a_store_error(filled):
    """DuckDB refuses a second configuration of an open file in one process; that must come
    out as our StoreError with the path, not a raw duckdb exception."""
    with DuckDBEventStore(filled), pytest.raises(StoreError, match=str(filled)):
        DuckDBEventStore(filled, read_only=True)


# ---- failed transactions -------------------------------------------------------------------
def test_position_clash_rolls_back_the_whole_group_and_caches_recover(filled):
    """Another writer took the next position behind our back: the insert fails inside the
    transaction. Nothing of the group may remain, and the cached position must not stick."""
    with DuckDBEventStore(filled) as store:
        assert store.last_position() == 30  # cached now
        intruder = raw_row("intruder", 1, 32, "TurnAssigned",
                           {"type": "TurnAssigned", "turn_id": "i", "role": "bull", "round": 1},
                           key=TEST_KEY)
        insert_raw(filled, [intruder])  # same process: shares the open database

        results = store.append_batches([AppendRequest("run-a", turns("x1", "x2")),
                                        AppendRequest("new", turns("y1"))])
        assert all(isinstance(r, duckdb.ConstraintException) for r in results)
        assert rows(filled, "SELECT count(*) FROM events")[0][0] == 31
        assert rows(filled, "SELECT count(*) FROM events WHERE stream IN ('new', 'run-a') "
                            "AND seq > 10")[0][0] == 0
        assert store.version("run-a") == 10 and store.version("new") == 0

        again = store.append_batches([AppendRequest("run-a", turns("x1", "x2")),
                                      AppendRequest("new", turns("y1"))])
        assert [(e.stream, e.seq, e.position) for e in again[0] + again[1]] == \
            [("run-a", 11, 33), ("run-a", 12, 34), ("new", 1, 35)]
        assert all(store.verify(s).ok for s in ("run-a", "new", "intruder"))


def test_stale_stream_head_rolls_back_and_recovers(filled):
    """A row was added to our stream behind our back: (stream, seq) clashes, the batch is
    rolled back, and the next append continues after the intruding row."""
    with DuckDBEventStore(filled) as store:
        assert store.version("run-b") == 10  # cached now
        tail = store.read_stream("run-b")[-1]
        extra = raw_row("run-b", 11, 99, "TurnAssigned",
                        {"type": "TurnAssigned", "turn_id": "i", "role": "bull", "round": 1},
                        prev_hash=tail.hash, key=TEST_KEY)
        insert_raw(filled, [extra])

        with pytest.raises(duckdb.ConstraintException):
            store.append("run-b", turns("z1", "z2", "z3"))
        assert rows(filled, "SELECT max(seq), count(*) FROM events WHERE stream = 'run-b'")[0] \
            == (11, 11)
        (event,) = store.append("run-b", turns("z1"))
        assert (event.seq, event.position, event.prev_hash) == (12, 100, extra.hash)
        assert store.verify("run-b").ok


# ---- tamper detection ----------------------------------------------------------------------
def test_verify_names_an_edited_payload(filled):
    rows(filled, "UPDATE events SET payload = replace(payload, 'bear', 'bull') "
                 "WHERE stream = 'run-a' AND seq = 4")
    with DuckDBEventStore(filled) as store:
        result = store.verify("run-a")
        assert (result.ok, result.first_bad_seq, result.checked) == (False, 4, 4)
        assert "seq 4 (TurnAssigned) was altered" in result.problem
        assert store.read_stream("run-a")[3].payload.role == "bull"  # it still parses
        assert store.verify("run-b").ok and store.verify("memory").ok


def test_verify_names_an_edited_envelope(filled):
    rows(filled, "UPDATE events SET actor = 'mallory' WHERE stream = 'run-b' AND seq = 9")
    with DuckDBEventStore(filled) as store:
        assert store.verify("run-b").first_bad_seq == 9


def test_verify_names_a_removed_event(filled):
    rows(filled, "DELETE FROM events WHERE stream = 'memory' AND seq = 6")
    with DuckDBEventStore(filled) as store:
        result = store.verify("memory")
        assert (result.ok, result.first_bad_seq) == (False, 6)
        assert "seq 6 is missing" in result.problem


def test_verify_names_a_swapped_order(filled):
    rows(filled, "UPDATE events SET seq = CASE seq WHEN 3 THEN 1003 ELSE 1004 END "
                 "WHERE stream = 'run-a' AND seq IN (3, 4)")
    rows(filled, "UPDATE events SET seq = seq - 1000 + CASE seq WHEN 1003 THEN 1 ELSE -1 END "
                 "WHERE stream = 'run-a' AND seq > 1000")
    assert rows(filled, "SELECT seq FROM events WHERE stream = 'run-a' ORDER BY position")[2:4] \
        == [(4,), (3,)]
    with DuckDBEventStore(filled) as store:
        result = store.verify("run-a")
        assert (result.ok, result.first_bad_seq) == (False, 3)
        assert "does not follow the previous event" in result.problem


def test_truncating_the_last_event_is_not_detectable_by_the_chain(filled):
    """Known limit: a hash chain proves every event follows the one before it, but nothing
    points forward, so deleting the newest events of a stream leaves a valid shorter chain.
    Detecting that needs an external anchor (e.g. a head hash recorded elsewhere)."""
    rows(filled, "DELETE FROM events WHERE stream = 'run-a' AND seq = 10")
    with DuckDBEventStore(filled) as store:
        result = store.verify("run-a")
        assert (result.ok, result.checked) == (True, 9)


def test_verify_all_sees_a_cut_off_stream_through_the_global_positions(filled):
    """What one stream's chain cannot see (its newest event deleted), the global positions
    can: one writer numbers them without gaps."""
    with DuckDBEventStore(filled, chain_key=TEST_KEY) as store:
        assert store.verify_all().ok
    rows(filled, "DELETE FROM events WHERE stream = 'run-a' AND seq = 10")
    with DuckDBEventStore(filled, chain_key=TEST_KEY) as store:
        results = {r.stream: r for r in store.verify_all().problems}
        assert "run-a" not in results  # the chain alone is fine
        positions = results["(positions)"]
        assert not positions.ok and "is missing: an event was removed" in positions.problem
        (gap,) = rows(filled, "SELECT max(position) + 1 FROM events WHERE stream = 'run-a'")
        assert f"global position {gap[0]} is missing" in positions.problem


# ---- stores written before keyed chains (schema version, not a rewrite) --------------------
OLD_SCHEMA = """
CREATE TABLE events (
    position BIGINT PRIMARY KEY, event_id VARCHAR NOT NULL UNIQUE, stream VARCHAR NOT NULL,
    seq INTEGER NOT NULL, type VARCHAR NOT NULL, schema_version INTEGER NOT NULL,
    recorded_at TIMESTAMP NOT NULL, actor VARCHAR NOT NULL, causation_id VARCHAR,
    idempotency_key VARCHAR, prev_hash VARCHAR NOT NULL, hash VARCHAR NOT NULL,
    payload VARCHAR NOT NULL, UNIQUE (stream, seq));
CREATE INDEX events_by_stream ON events (stream);
"""


@pytest.fixture
def old_store(path):
    """A file exactly as the code before keyed chains wrote it: 13 columns, unkeyed hashes,
    no bodies, no meta, no anchor."""
    path.parent.mkdir(parents=True)
    con = duckdb.connect(str(path))
    con.execute(OLD_SCHEMA)
    prev = "0" * 64
    for seq in range(1, 6):
        row = raw_row("old", seq, seq, "TurnAssigned",
                      {"type": "TurnAssigned", "turn_id": f"o{seq}" + "x" * 300, "role": "bull",
                       "round": 1}, prev_hash=prev)
        con.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    [row.position, row.event_id, row.stream, row.seq, row.type,
                     row.schema_version, row.recorded_at.replace(tzinfo=None), row.actor, None,
                     None, row.prev_hash, row.hash, row.payload_json])
        prev = row.hash
    con.close()
    return path


def test_an_old_store_opens_read_only_as_it_is_and_verifies(old_store):
    with DuckDBEventStore(old_store, read_only=True) as store:
        events = store.read_stream("old")
        assert [(e.seq, e.chain) for e in events] == [(s, 1) for s in range(1, 6)]
        assert events[0].payload.turn_id == "o1" + "x" * 300
        report = store.verify_all()
        assert report.ok and report.events == 5 and report.anchor == "none"
        assert report.checkpoint is None  # read-only: nothing written
    assert rows(old_store, "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'events'"
                ) == [(13,)]


def test_an_old_store_gets_the_new_schema_and_chains_on_without_rewriting(old_store):
    before = rows(old_store, "SELECT position, hash, payload FROM events ORDER BY position")
    with DuckDBEventStore(old_store) as store:
        (new,) = store.append("old", turns("n6"))
        assert (new.seq, new.position, new.chain) == (6, 6, 2)
        assert store.verify("old").ok and store.verify_all().ok
    assert rows(old_store, "SELECT position, hash, payload FROM events WHERE position <= 5 "
                           "ORDER BY position") == before
    assert rows(old_store, "SELECT chain, count(*) FROM events GROUP BY chain ORDER BY 1") == \
        [(1, 5), (2, 1)]
    # and a downgrade of the new event to an unkeyed hash is a forgery
    forged = raw_row("old", 6, 6, "TurnAssigned",
                     {"type": "TurnAssigned", "turn_id": "n6", "role": "bear", "round": 1},
                     prev_hash=before[-1][1])
    rows(old_store, "DELETE FROM events WHERE position = 6")
    insert_raw(old_store, [forged])
    with DuckDBEventStore(old_store, read_only=True) as store:
        problems = {p.stream: p.problem for p in store.verify_all().problems}
        assert "unkeyed hash after keyed events began: forged" in problems["old"]


def test_rows_are_built_by_column_name_whatever_the_column_order(filled):
    """A file whose columns are in another order (e.g. a copy made with CREATE TABLE AS)."""
    rows(filled, "CREATE TABLE shuffled AS SELECT chain, payload, hash, prev_hash, "
                 "idempotency_key, causation_id, actor, recorded_at, schema_version, type, seq, "
                 "stream, event_id, position FROM events")
    rows(filled, "DROP TABLE events")
    rows(filled, "ALTER TABLE shuffled RENAME TO events")
    with DuckDBEventStore(filled, read_only=True) as store:
        events = store.read_stream("run-a")
        assert [e.seq for e in events] == list(range(1, 11))
        assert events[0].payload.turn_id == "run-a-0-1"
        assert store.verify("run-a").ok


# ---- packed bodies ----------------------------------------------------------------------------
def report(text: str) -> list[NewEvent]:
    return [NewEvent(AnalystReportSubmitted(turn_id="analyst:market", analyst="market",
                                            report=text), actor="worker")]


TABLE = "\n".join(f"2024-05-{d:02d},{900 + d}.25,{910 + d}.5,{890 + d}.75,{905 + d}.0,4{d}1000"
                  for d in range(1, 29))  # a tool result: compresses well
SHORT = "Momentum is positive but the last three sessions closed below the open, twice."


def test_long_bodies_are_packed_short_ones_stay_text_and_both_read_back(path):
    with DuckDBEventStore(path) as store:
        (event,) = store.append("run-a", report(f"{TABLE}\n\n{SHORT}"))
        assert store.read_stream("run-a")[0].payload.report == f"{TABLE}\n\n{SHORT}"
        assert store.verify_all().ok
    stored = dict((t, (text, packed)) for t, text, packed in rows(
        path, "SELECT CASE WHEN packed IS NULL THEN 'text' ELSE 'packed' END, text, packed "
              "FROM bodies"))
    assert stored["packed"][0] == "" and len(stored["packed"][1]) < len(TABLE) * 0.5
    assert stored["text"] == (SHORT, None)


def test_an_altered_packed_body_is_caught(path):
    import zlib
    with DuckDBEventStore(path) as store:
        store.append("run-a", report(TABLE))
    rows(path, "UPDATE bodies SET packed = ? WHERE packed IS NOT NULL",
         [zlib.compress(TABLE.replace("901.25", "951.25").encode())])
    with DuckDBEventStore(path, read_only=True) as store:
        result = store.verify_all()
    assert not result.ok and "altered" in result.problems[0].problem


def test_a_lean_store_from_before_packing_reads_and_then_packs_new_bodies(path):
    """Bodies written as plain text (no ``packed`` column) read as they are, read-only or
    not; a read-write open adds the column and new bodies are packed beside the old ones."""
    with DuckDBEventStore(path) as store:
        store.append("run-a", report(TABLE))
    rows(path, "UPDATE bodies SET text = ? WHERE packed IS NOT NULL", [TABLE])
    rows(path, "ALTER TABLE bodies DROP COLUMN packed")
    with DuckDBEventStore(path, read_only=True) as store:
        assert store.read_stream("run-a")[0].payload.report == TABLE
        assert store.verify_all().ok
    with DuckDBEventStore(path) as store:
        store.append("run-b", report(TABLE.replace("2024", "2023")))
        assert [e.payload.report[:4] for e in store.read_all()] == ["2024", "2023"]
        assert store.verify_all().ok
    assert rows(path, "SELECT count(packed) FROM bodies") == [(1,)]


def test_a_writer_is_not_capped_and_a_reader_is(path):
    """DuckDB keeps the indexes a writer inserts into in memory (~120 bytes an event here):
    with the readers' 128 MB cap on the writer too, appends to a store of ~1M events (13,500
    runs) failed with "failed to pin block" (found by bench.history; too big for a unit test,
    which checks the settings). Readers keep the cap: a full verify stays bounded."""
    from events.duckdb_store import READ_MEMORY_LIMIT

    def limit(store) -> float:
        text = store._con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        number, unit = text.split()
        return float(number) * {"KiB": 2**-10, "MiB": 1, "GiB": 2**10, "TiB": 2**20}[unit]

    cap = float(READ_MEMORY_LIMIT.removesuffix("MB")) * 1e6 / 2**20
    with DuckDBEventStore(path) as store:
        store.append("run-1", turns("a", "b"))
        assert limit(store) > 4 * cap  # DuckDB's own default (a share of RAM)
    with DuckDBEventStore(path, read_only=True) as reader:
        assert abs(limit(reader) - cap) < 1
        assert len(reader.read_stream("run-1")) == 2
