"""Read models: DuckDB tables kept up to date from the event log by a generic recorder.

A *view* is plain data handed in from above (``events`` imports nothing of ours, so the view
set is passed in): a name, a version, its tables and indexes, the event types it reads, a pure
function ``changes(event) -> [Insert | Update | Delete]`` and its named SQL queries.

The recorder applies a batch of events to every view and advances the view's global
position **in the same transaction** (the "process recorder" pattern of the eventsourcing
library: the tracking position is stored with the projection's own writes), so a crash
leaves each view exactly at some position, never half-applied. On open it creates what is
missing, drops and rebuilds any view whose version changed, and catches up from the event
log (``read_all(after_position=...)`` in chunks). A read model is a cache: delete it and it
is rebuilt from events.

Tables have no PRIMARY KEY / UNIQUE constraints (DuckDB checks unique indexes eagerly, which
breaks an update followed by an insert of the same key in one transaction); plain indexes
serve the point lookups.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the definitions are imported by light processes (workers): no duckdb
    import duckdb

POSITIONS_TABLE = "view_positions"
CHUNK = 5000


# ---- the vocabulary of row changes (plain data) ---------------------------------------------
class _NotNull:
    def __repr__(self) -> str:
        return "NOT_NULL"


#: In a ``where``: the column is not NULL. (``None`` in a ``where`` means IS NULL.)
NOT_NULL = _NotNull()


@dataclass(frozen=True, slots=True)
class Ref:
    """In a ``where``: the value of ``column`` in the row of ``table`` matching ``key``
    (a scalar sub-query; NULL, so matching nothing, when there is no such row)."""
    table: str
    column: str
    key: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Add:
    """In an Update's ``values``: add to the column's current value (NULL counts as 0)."""
    amount: float | int


@dataclass(frozen=True, slots=True)
class Insert:
    table: str
    row: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Update:
    table: str
    where: Mapping[str, Any]
    values: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Delete:
    table: str
    where: Mapping[str, Any]


Change = Insert | Update | Delete


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: Sequence[tuple[str, str]]  # (name, DuckDB type)
    indexes: Sequence[Sequence[str]] = ()  # columns of each plain index


@dataclass(frozen=True)
class View:
    name: str
    version: int
    tables: Sequence[Table]
    types: Sequence[str]  # event types it reads (the catch-up filters on them)
    changes: Callable[[Any], list[Change]]  # StoredEvent -> row changes; pure
    queries: Mapping[str, str] = field(default_factory=dict)  # name -> SQL with $params


# ---- the recorder ---------------------------------------------------------------------------
class ViewRecorder:
    """Keeps ``views`` in the DuckDB connection ``con`` (a cursor of the store's own file, or a
    ``duckdb.connect(':memory:')`` next to an in-memory store). Thread-safe."""

    def __init__(self, con: duckdb.DuckDBPyConnection, views: Sequence[View]):
        self._con = con
        self.views = list(views)
        self._lock = threading.RLock()
        self._positions: dict[str, int] = {}
        self._queries = {q: v for v in self.views for q in v.queries}
        self._tables = {t.name: t for v in self.views for t in v.tables}
        self._setup()

    # ---- schema and versions --------------------------------------------------------------
    def _setup(self) -> None:
        with self._lock:
            self._con.execute(f"CREATE TABLE IF NOT EXISTS {POSITIONS_TABLE} (name VARCHAR, "
                              "version INTEGER, position BIGINT, tables VARCHAR)")
            known = {n: (v, p, t) for n, v, p, t in self._con.execute(
                f"SELECT name, version, position, tables FROM {POSITIONS_TABLE}").fetchall()}
            tables = {r[0] for r in self._con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
                " AND schema_name = current_schema()").fetchall()}
            for view in self.views:
                stored = known.get(view.name)
                if (stored is None or stored[0] != view.version
                        or any(t.name not in tables for t in view.tables)):  # deleted: rebuild
                    self._reset(view, (stored[2] or "").split(",") if stored else [])
                else:
                    self._positions[view.name] = stored[1]

    def _reset(self, view: View, old_tables: Iterable[str] = ()) -> None:
        """Drop the view's tables (and those an older version had) and start it at 0."""
        con = self._con
        con.execute("BEGIN TRANSACTION")
        try:
            for name in {*(t for t in old_tables if t), *(t.name for t in view.tables)}:
                con.execute(f"DROP TABLE IF EXISTS {name}")
            for table in view.tables:
                cols = ", ".join(f"{c} {t}" for c, t in table.columns)
                con.execute(f"CREATE TABLE {table.name} ({cols})")
                for columns in table.indexes:
                    con.execute(f"CREATE INDEX {table.name}_by_{'_'.join(columns)} "
                                f"ON {table.name} ({', '.join(columns)})")
            con.execute(f"DELETE FROM {POSITIONS_TABLE} WHERE name = ?", [view.name])
            con.execute(f"INSERT INTO {POSITIONS_TABLE} VALUES (?, ?, 0, ?)",
                        [view.name, view.version, ",".join(t.name for t in view.tables)])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        self._positions[view.name] = 0

    def positions(self) -> dict[str, int]:
        with self._lock:
            return dict(self._positions)

    def position(self) -> int:
        """The position every view has applied (the smallest of them)."""
        with self._lock:
            return min(self._positions.values(), default=0)

    # ---- applying events --------------------------------------------------------------------
    def apply(self, events: Sequence[Any], up_to: int | None = None) -> None:
        """Apply ``events`` (in position order) to every view that has not seen them, and move
        each view to ``up_to`` (default: the last event's position), all in one transaction.
        The caller guarantees that no event between a view's position and ``up_to`` is
        missing from ``events`` (of the types the view reads)."""
        if up_to is None:
            if not events:
                return
            up_to = events[-1].position
        with self._lock:
            behind = [v for v in self.views if self._positions[v.name] < up_to]
            if not behind:
                return
            con = self._con
            con.execute("BEGIN TRANSACTION")
            try:
                for view in behind:
                    start, wanted = self._positions[view.name], set(view.types)
                    changes = [c for e in events if e.position > start and e.type in wanted
                               for c in view.changes(e)]
                    self._write(changes)
                    con.execute(f"UPDATE {POSITIONS_TABLE} SET position = ? WHERE name = ?",
                                [up_to, view.name])
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            for view in behind:
                self._positions[view.name] = up_to

    def after_commit(self, store: Any, events: Sequence[Any]) -> None:
        """Apply what one append (group commit) wrote: ``events`` are already decoded, so no
        re-read, unless the views are behind what came before them (then catch up)."""
        fresh = sorted((e for e in events if e.position > self.position()),
                       key=lambda e: e.position)
        with self._lock:
            if fresh and fresh[0].position == self.position() + 1 and all(
                    b.position == a.position + 1 for a, b in zip(fresh, fresh[1:])):
                self.apply(fresh)
            else:
                self.catch_up(store)

    def catch_up(self, store: Any, chunk: int = CHUNK,
                 progress: Callable[[int, int], None] | None = None) -> int:
        """Read what the views have not applied yet from ``store`` and apply it; returns the
        number of events read. ``progress(position, last)`` is called after each chunk.

        Views that lag behind the others (a new view, or one rebuilt after a version change)
        catch up first, alone, reading only their own event types up to where the next view
        stands: adding a view to a store of millions of events reads only the events it needs."""
        with self._lock:
            last, read = store.last_position(), 0
            while (start := self.position()) < last:
                lagging = [v for v in self.views if self._positions[v.name] == start]
                target = min([p for p in self._positions.values() if p > start] + [last])
                types = sorted({t for v in lagging for t in v.types})
                read += self._read_into(store, start, target, types, chunk, progress, last)
            return read

    def _read_into(self, store: Any, after: int, target: int, types: list[str], chunk: int,
                   progress: Callable[[int, int], None] | None, last: int) -> int:
        """Apply the events of ``types`` in (after, target] to the views standing at ``after``."""
        read = 0
        while after < target:
            batch = [e for e in store.read_all(after_position=after, limit=chunk, types=types)
                     if e.position <= target]
            read += len(batch)
            up_to = batch[-1].position if len(batch) == chunk else target
            self.apply(batch, up_to)
            after = up_to
            if progress is not None:
                progress(after, last)
        return read

    def rebuild(self, store: Any, progress: Callable[[int, int], None] | None = None
                ) -> tuple[int, dict[str, int]]:
        """Drop every view and rebuild it from events: (events read, rows per table)."""
        with self._lock:
            for view in self.views:
                self._reset(view)
            read = self.catch_up(store, progress=progress)
            return read, self.counts()

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {name: self._scalar(f"SELECT count(*) FROM {name}") for name in self._tables}

    def _scalar(self, sql: str) -> Any:
        row = self._con.execute(sql).fetchone()
        return None if row is None else row[0]

    # ---- writing changes --------------------------------------------------------------------
    def _write(self, changes: list[Change]) -> None:
        """Consecutive inserts into one table go in as one statement; the order of changes
        is kept otherwise (an update sees every insert before it)."""
        pending: list[Insert] = []
        for change in changes:
            if isinstance(change, Insert) and (not pending or pending[0].table == change.table):
                pending.append(change)
                continue
            self._flush(pending)
            pending = []
            if isinstance(change, Insert):
                pending.append(change)
            else:
                self._modify(change)
        self._flush(pending)

    def _flush(self, inserts: list[Insert]) -> None:
        if not inserts:
            return
        table = self._tables[inserts[0].table]
        names = [c for c, _ in table.columns]
        columns = [[i.row.get(c) for i in inserts] for c in names]
        select = ", ".join(f"unnest(${n + 1}::{t}[])" for n, (_, t) in enumerate(table.columns))
        self._con.execute(f"INSERT INTO {table.name} ({', '.join(names)}) SELECT {select}",
                          columns)

    def _modify(self, change: Update | Delete) -> None:
        params: list[Any] = []
        sets = ""
        if isinstance(change, Update):
            parts = []
            for col, value in change.values.items():
                if isinstance(value, Add):
                    parts.append(f"{col} = coalesce({col}, 0) + ?")
                    params.append(value.amount)
                else:
                    parts.append(f"{col} = ?")
                    params.append(value)
            sets = " SET " + ", ".join(parts)
        conditions = []
        for col, value in change.where.items():
            if value is None:
                conditions.append(f"{col} IS NULL")
            elif value is NOT_NULL:
                conditions.append(f"{col} IS NOT NULL")
            elif isinstance(value, Ref):
                keys = " AND ".join(f"{k} = ?" for k in value.key)
                conditions.append(f"{col} = (SELECT {value.column} FROM {value.table} "
                                  f"WHERE {keys} LIMIT 1)")
                params.extend(value.key.values())
            else:
                conditions.append(f"{col} = ?")
                params.append(value)
        where = " AND ".join(conditions) or "TRUE"
        verb = "UPDATE" if isinstance(change, Update) else "DELETE FROM"
        self._con.execute(f"{verb} {change.table}{sets} WHERE {where}", params)

    # ---- reading ----------------------------------------------------------------------------
    def query(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        """Run the named query; rows as dicts."""
        if name not in self._queries:
            raise KeyError(f"no read-model query {name!r}; known: {', '.join(self._queries)}")
        sql = self._queries[name].queries[name]
        with self._lock:
            cursor = self._con.execute(sql, dict(params or {}))
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    def table_rows(self, table: str) -> list[tuple]:
        """Every row of a view table in a stable order (for comparing two read models)."""
        with self._lock:
            cols = ", ".join(c for c, _ in self._tables[table].columns)
            return self._con.execute(f"SELECT {cols} FROM {table} ORDER BY ALL").fetchall()

    def close(self) -> None:
        with self._lock:
            self._con.close()


def connection_for(store: Any) -> duckdb.DuckDBPyConnection:
    """Where ``store``'s read models live: in its own DuckDB file (a second connection to the
    same database), or in memory next to a store that has no file."""
    import duckdb
    con = getattr(store, "_con", None)
    if isinstance(con, duckdb.DuckDBPyConnection):
        return con.cursor()
    return duckdb.connect(":memory:")


def open_views(store: Any, views: Sequence[View], catch_up: bool = True) -> ViewRecorder:
    """A recorder for ``store``, caught up with every committed event."""
    recorder = ViewRecorder(connection_for(store), views)
    if catch_up:
        recorder.catch_up(store)
    return recorder
