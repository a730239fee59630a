"""DuckDB backend: one file, one writing process (DuckDB's own rule), batched commits.

Schema versions are additive, never a rewrite: a store written before keyed chains gets a
``chain`` column (1 for its old rows), a ``bodies`` table (lean events), ``store_meta`` (the
chain key's id) and ``verify_checkpoints`` when it is first opened for writing; opened
read-only it is read as it is. Beside the file, ``<file>.anchor`` holds the signed head.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import json
import os
import zlib
from pathlib import Path

import duckdb

from events.envelope import RawEvent
from events.store import EventStore, StoreError, StoreLockedError, StreamInfo

_BASE = ("position, event_id, stream, seq, type, schema_version, recorded_at, actor, "
         "causation_id, idempotency_key, prev_hash, hash")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    position BIGINT PRIMARY KEY,
    event_id VARCHAR NOT NULL UNIQUE,
    stream VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    type VARCHAR NOT NULL,
    schema_version INTEGER NOT NULL,
    recorded_at TIMESTAMP NOT NULL,
    actor VARCHAR NOT NULL,
    causation_id VARCHAR,
    idempotency_key VARCHAR,
    prev_hash VARCHAR NOT NULL,
    hash VARCHAR NOT NULL,
    payload VARCHAR NOT NULL,
    UNIQUE (stream, seq)
);
CREATE INDEX IF NOT EXISTS events_by_stream ON events (stream);
ALTER TABLE events ADD COLUMN IF NOT EXISTS chain INTEGER DEFAULT 1;
CREATE TABLE IF NOT EXISTS bodies (id VARCHAR PRIMARY KEY, text VARCHAR NOT NULL);
ALTER TABLE bodies ADD COLUMN IF NOT EXISTS packed BLOB;
CREATE TABLE IF NOT EXISTS store_meta (name VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS verify_checkpoints (
    position BIGINT NOT NULL, hash VARCHAR NOT NULL, verified_at TIMESTAMP NOT NULL,
    signature VARCHAR NOT NULL);
"""
_INSERT = (f"INSERT INTO events ({_BASE}, payload, chain) SELECT unnest($1::BIGINT[]), "
           "unnest($2::VARCHAR[]), unnest($3::VARCHAR[]), unnest($4::INTEGER[]), "
           "unnest($5::VARCHAR[]), unnest($6::INTEGER[]), unnest($7::TIMESTAMP[]), "
           "unnest($8::VARCHAR[]), unnest($9::VARCHAR[]), unnest($10::VARCHAR[]), "
           "unnest($11::VARCHAR[]), unnest($12::VARCHAR[]), unnest($13::VARCHAR[]), "
           "unnest($14::INTEGER[])")
_INSERT_BODIES = ("INSERT OR IGNORE INTO bodies (id, text, packed) "
                  "SELECT unnest($1::VARCHAR[]), unnest($2::VARCHAR[]), unnest($3::BLOB[])")
#: A body is stored zlib-compressed (``packed``, ``text`` empty) when that saves at least this
#: share; tool results and reports shrink by about 40%, short paragraphs stay plain text.
PACK_SAVING = 0.1


def _pack(text: str) -> tuple[str, bytes | None]:
    raw = text.encode()
    packed = zlib.compress(raw, 6)
    return ("", packed) if len(packed) <= len(raw) * (1 - PACK_SAVING) else (text, None)


#: RawEvent's positional fields, in order (``chain`` is keyword-only)
_FIELDS = tuple(f.name for f in dataclasses.fields(RawEvent) if f.name != "chain")
#: what DuckDB raises when the file itself is damaged (truncated, overwritten, bad blocks)
#: DuckDB buffer memory of a read-only store: reads stay bounded whatever the store's size (a
#: full verify of 100,000 runs: 923 MB with DuckDB's default, 300 MB with this; same time).
#: A writer is not capped: DuckDB keeps the indexes it inserts into in memory (~120 bytes an
#: event with the read models'), so a 128 MB cap made appends fail past ~1M events.
READ_MEMORY_LIMIT = "128MB"

_DAMAGE = (duckdb.IOException, duckdb.SerializationException, duckdb.InternalException,
           duckdb.FatalException)


def _no_space(exc: BaseException) -> bool:
    text = str(exc).lower()
    return ("no space left" in text or "disk is full" in text
            or getattr(exc, "errno", None) == errno.ENOSPC)


class DuckDBEventStore(EventStore):
    """``read_only`` opens an existing file without taking the write lock's exclusivity.
    ``chain_key`` is the key of the keyed chain; None resolves it with
    :func:`events.chain.load_chain_key` when it is first needed."""

    def __init__(self, path: str | os.PathLike, read_only: bool = False, *,
                 chain_key: bytes | None = None):
        super().__init__(chain_key=chain_key)
        self.path = Path(path).expanduser()
        self.read_only = read_only
        self.anchor_path = Path(str(self.path) + ".anchor")
        if read_only and not self.path.exists():
            raise StoreError(f"no event store at {self.path}")
        created = not self.path.exists()
        if not read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._os_error(exc) from None
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
            if read_only:  # DuckDB's own default would cache up to 80% of RAM of a file
                # read end to end (verify); our reads are windows and indexed lookups
                self._con.execute(f"SET memory_limit = '{READ_MEMORY_LIMIT}'")
        except duckdb.Error as exc:  # IOException (lock), ConnectionException (config), ...
            if created:
                self._remove_new_file()
            if "lock" in str(exc).lower():
                raise StoreLockedError(
                    f"event store {self.path} is in use by another process; wait for that run "
                    "to finish, connect to its cluster with --address, or use another --store"
                ) from None
            raise self._open_error(exc, created) from None
        try:
            if not read_only:
                self._con.execute(_SCHEMA)
                self._con.execute("CHECKPOINT")  # the schema reaches the file, not just the WAL
            self._columns = self._inspect()
        except (duckdb.Error, StoreError) as exc:
            self._con.close()
            if created:
                self._remove_new_file()
            if isinstance(exc, StoreError):
                raise
            raise self._open_error(exc, created) from None
        chain = "chain" if "chain" in self._columns.get("events", ()) else "1 AS chain"
        self._select = f"SELECT {_BASE}, payload AS payload_json, {chain} FROM events"

    # ---- opening and errors -------------------------------------------------------------
    def _inspect(self) -> dict[str, set[str]]:
        tables: dict[str, set[str]] = {}
        for table, column in self._con.execute(
                "SELECT table_name, column_name FROM duckdb_columns() "
                "WHERE database_name = current_database() AND schema_name = 'main'").fetchall():
            tables.setdefault(table, set()).add(column)
        needed = {"position", "event_id", "stream", "seq", "hash", "prev_hash", "payload"}
        if not needed <= tables.get("events", set()):
            raise StoreError(f"{self.path} is not a valid ta-actors event store (corrupt or "
                             "truncated): it has no events table")
        return tables

    def _remove_new_file(self) -> None:
        """Initialising a new file failed: leave no 0-byte or half-made store behind."""
        for leftover in (self.path, Path(str(self.path) + ".wal")):
            with contextlib.suppress(OSError):  # never there, or already gone
                leftover.unlink()

    def _os_error(self, exc: BaseException) -> StoreError:
        if _no_space(exc):
            return StoreError(f"no space left on device: {self.path}")
        return StoreError(f"cannot open event store {self.path}: {exc}")

    def _open_error(self, exc: BaseException, created: bool) -> StoreError:
        if _no_space(exc):
            return StoreError(f"no space left on device: {self.path}")
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        access = ("permission denied", "read-only file system", "operation not permitted")
        if (not created and isinstance(exc, _DAMAGE)
                and not any(word in reason.lower() for word in access)):
            return StoreError(f"{self.path} is not a valid ta-actors event store (corrupt or "
                              f"truncated): {reason}")
        return StoreError(f"cannot open event store {self.path}: {reason}")

    def _damaged(self, exc: BaseException) -> StoreError:
        """A read failed below SQL: the file is damaged (or the disk is full)."""
        if _no_space(exc):
            return StoreError(f"no space left on device: {self.path}")
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreError(f"{self.path} is not a valid ta-actors event store (corrupt or "
                          f"truncated): {reason}")

    def _where(self) -> str:
        return str(self.path)

    def close(self) -> None:
        with self._lock:  # never while another thread is using the connection
            self._con.close()

    def _query(self, sql: str, params: list | tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._con.execute(sql, params).fetchall()
            except _DAMAGE as exc:
                raise self._damaged(exc) from None

    def _rows(self, sql: str, params: list | tuple = ()) -> list[RawEvent]:
        """Rows built by column name, whatever the column order of the file."""
        with self._lock:
            try:
                cursor = self._con.execute(sql, params)
                names = [d[0] for d in cursor.description]
                values = cursor.fetchall()
            except _DAMAGE as exc:
                raise self._damaged(exc) from None
        # the file's columns are mapped to RawEvent's fields by name once per query
        order = [names.index(f) for f in _FIELDS]
        at, chain = _FIELDS.index("recorded_at"), names.index("chain")
        out = []
        for row in values:
            args = [row[i] for i in order]
            args[at] = args[at].replace(tzinfo=dt.UTC)
            out.append(RawEvent(*args, chain=row[chain]))
        return out

    # ---- primitives ---------------------------------------------------------------------
    def _load_head(self, stream: str) -> tuple[int, str] | None:
        rows = self._query("SELECT seq, hash FROM events WHERE stream = ? ORDER BY seq DESC "
                           "LIMIT 1", [stream])
        return (rows[0][0], rows[0][1]) if rows else None

    def _load_keys(self, stream: str) -> set[str]:
        return {k for (k,) in self._query(
            "SELECT idempotency_key FROM events WHERE stream = ? AND idempotency_key IS NOT "
            "NULL", [stream])}

    def _load_max_position(self) -> int:
        return self._query("SELECT coalesce(max(position), 0) FROM events")[0][0]

    def _count_upto(self, position: int | None) -> int:
        if position is None:
            return self._query("SELECT count(*) FROM events")[0][0]
        return self._query("SELECT count(*) FROM events WHERE position <= ?", [position])[0][0]

    def _raw_by_key(self, stream: str, key: str) -> list[RawEvent]:
        return self._rows(f"{self._select} WHERE stream = ? AND idempotency_key = ? ORDER BY seq",
                          [stream, key])

    def _insert(self, rows: list[RawEvent], bodies: dict[str, str] | None = None,
                meta: dict[str, str] | None = None) -> None:
        if self.read_only:
            raise StoreError(f"event store {self.path} is open read-only")
        columns = list(zip(*(
            (r.position, r.event_id, r.stream, r.seq, r.type, r.schema_version,
             r.recorded_at.replace(tzinfo=None), r.actor, r.causation_id, r.idempotency_key,
             r.prev_hash, r.hash, r.payload_json, r.chain) for r in rows)))
        con = self._con
        try:
            con.execute("BEGIN TRANSACTION")
        except duckdb.Error as exc:
            raise self._write_error(exc) from None
        try:  # one statement per batch: column arrays unnested server-side (~10x executemany)
            if bodies:
                texts, packed = zip(*map(_pack, bodies.values()))
                con.execute(_INSERT_BODIES, [list(bodies), list(texts), list(packed)])
            for name, value in (meta or {}).items():
                con.execute("INSERT OR IGNORE INTO store_meta VALUES (?, ?)", [name, value])
            con.execute(_INSERT, [list(c) for c in columns])
            con.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(duckdb.Error):  # a failed COMMIT may have ended it already
                con.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error) and not isinstance(exc, duckdb.ConstraintException):
                raise self._write_error(exc) from None
            raise

    def _write_error(self, exc: BaseException) -> BaseException:
        if _no_space(exc):
            return StoreError(f"no space left on device: {self.path}")
        return exc

    def _raw_stream(self, stream: str, from_seq: int, to_seq: int | None) -> list[RawEvent]:
        sql = f"{self._select} WHERE stream = ? AND seq >= ?"
        params: list = [stream, from_seq]
        if to_seq is not None:
            sql, params = sql + " AND seq <= ?", params + [to_seq]
        return self._rows(sql + " ORDER BY seq", params)

    def _raw_all(self, after_position: int, limit: int | None,
                 types: tuple[str, ...] | None = None) -> list[RawEvent]:
        sql, params = f"{self._select} WHERE position > ?", [after_position]
        if types:
            sql += f" AND type IN ({','.join('?' * len(types))})"
            params += list(types)
        sql += " ORDER BY position"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._rows(sql, params)

    def _raw_range(self, after_position: int, upto_position: int) -> list[RawEvent]:
        # a range, not "> x ORDER BY position LIMIT n": that one sorts everything after x on
        # every call, which makes a chunked pass over the store quadratic
        return self._rows(f"{self._select} WHERE position > ? AND position <= ? "
                          "ORDER BY position", [after_position, upto_position])

    def _stream_infos(self) -> list[StreamInfo]:
        rows = self._query(
            "SELECT stream, max(seq), min(recorded_at), max(recorded_at), "
            "arg_min(type, seq), arg_max(type, seq) FROM events GROUP BY stream "
            "ORDER BY min(position)")
        return [StreamInfo(s, v, f.replace(tzinfo=dt.UTC), last.replace(tzinfo=dt.UTC), ft, lt)
                for s, v, f, last, ft, lt in rows]

    def _load_bodies(self, ids: list[str]) -> dict[str, str]:
        if not ids or "bodies" not in self._columns:
            return {}
        if "packed" not in self._columns["bodies"]:  # a store written before packed bodies
            return dict(self._query("SELECT id, text FROM bodies WHERE id IN (SELECT unnest(?))",
                                    [ids]))
        rows = self._query("SELECT id, text, packed FROM bodies WHERE id IN (SELECT unnest(?))",
                           [ids])
        return {i: text if packed is None else zlib.decompress(packed).decode()
                for i, text, packed in rows}

    def _body_sizes(self, ids: list[str]) -> dict[str, int]:
        """Bytes each body takes in the table (compressed size where packed): benchmarks."""
        if not ids or "bodies" not in self._columns:
            return {}
        size = ("coalesce(octet_length(packed), strlen(text))" if "packed" in
                self._columns["bodies"] else "strlen(text)")
        return dict(self._query(f"SELECT id, {size} FROM bodies WHERE id IN (SELECT unnest(?))",
                                [ids]))

    def _load_meta(self, name: str) -> str | None:
        if "store_meta" not in self._columns:
            return None
        rows = self._query("SELECT value FROM store_meta WHERE name = ?", [name])
        return rows[0][0] if rows else None

    def _read_anchor(self) -> dict | None:
        try:
            return json.loads(self.anchor_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}  # unreadable: verify says so

    def _write_anchor(self, anchor: dict) -> None:
        tmp = self.anchor_path.with_name(f".{self.anchor_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(anchor))
        os.replace(tmp, self.anchor_path)

    def _anchor_where(self) -> str:
        return str(self.anchor_path)

    def _load_checkpoint(self) -> dict | None:
        if "verify_checkpoints" not in self._columns:
            return None
        rows = self._query("SELECT position, hash, signature FROM verify_checkpoints "
                           "ORDER BY verified_at DESC, position DESC LIMIT 1")
        return dict(zip(("position", "hash", "signature"), rows[0])) if rows else None

    def _save_checkpoint(self, point: dict) -> None:
        with self._lock:
            self._query("INSERT INTO verify_checkpoints VALUES (?, ?, ?, ?)",
                        [point["position"], point["hash"], point["verified_at"],
                         point["signature"]])
