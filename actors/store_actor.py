"""The event-store actor: the one process that holds DuckDB files open for writing (DuckDB
allows one writing process per file). It serves any number of files, each opened on first
use and closed when a command is done with it, so a new store costs a file open, not a new
worker process. Everything else reaches a file through a ``StoreRef``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray

from actors.store_file import OpenFile


@ray.remote(num_cpus=0, max_concurrency=1000)
class EventStoreActor:
    def __init__(self) -> None:
        from actors.logs import configure
        configure()
        self._files: dict[str, OpenFile] = {}

    def open(self, path: str) -> str | None:
        """Open ``path`` (if it is not open yet); why it cannot be opened, or None."""
        from events.duckdb_store import DuckDBEventStore  # duckdb lives in this process only
        from events.store import StoreError
        from projections.views import VIEWS
        if path not in self._files:
            try:
                self._files[path] = OpenFile(DuckDBEventStore(path), VIEWS)
            except StoreError as exc:
                return str(exc)
        return None

    def _file(self, path: str) -> OpenFile:
        known = self._files.get(path)  # the common case, on every call: no imports, no checks
        if known is not None:
            return known
        problem = self.open(path)
        if problem:
            from events.store import StoreError
            raise StoreError(problem)
        return self._files[path]

    async def close(self, path: str) -> bool:
        """Release ``path`` for other processes (pending appends are committed first)."""
        open_file = self._files.pop(path, None)
        if open_file is not None:
            await open_file.close()
        return True

    async def append(self, path: str, stream: str, events: list,
                     expected_version: int | None = None,
                     idempotency_key: str | None = None, positions_only: bool = False) -> list:
        """The stored events; with ``positions_only`` just their (seq, position) pairs: the
        caller has the payloads, and shipping them back costs more than the append."""
        stored = await self._file(path).append(stream, events, expected_version,
                                               idempotency_key)
        return [(e.seq, e.position) for e in stored] if positions_only else stored

    async def append_batch(self, path: str, requests: list[tuple]) -> list:
        """Many appends in one call — a worker's client-side group commit: each request is
        (stream, events, expected_version, idempotency_key); each answer is its (seq,
        position) pairs, or its error as plain data (exceptions with their own constructor
        arguments do not survive pickling)."""
        import asyncio
        open_file = self._file(path)
        results = await asyncio.gather(*(open_file.append(stream, events, expected, key)
                                         for stream, events, expected, key in requests),
                                       return_exceptions=True)
        return [_outcome(r) for r in results]

    async def read_stream(self, path: str, stream: str, from_seq: int = 1) -> list:
        return await self._file(path).read_stream(stream, from_seq)

    async def read_all(self, path: str, after_position: int = 0, limit: int | None = None,
                       types: list[str] | None = None) -> list:
        return await self._file(path).call("read_all", after_position=after_position,
                                           limit=limit, types=types)

    async def list_streams(self, path: str) -> list:
        return await self._file(path).call("list_streams")

    async def version(self, path: str, stream: str) -> int:
        return await self._file(path).call("version", stream)

    async def verify(self, path: str, stream: str) -> Any:
        return await self._file(path).call("verify", stream)

    async def verify_all(self, path: str, **options: Any) -> Any:
        """``options``: incremental, against, checkpoint (see EventStore.verify_all)."""
        return await self._file(path).call("verify_all", **options)

    async def head_anchor(self, path: str) -> dict:
        return await self._file(path).call("head_anchor")

    async def query(self, path: str, name: str, params: dict | None = None) -> list[dict]:
        """A named read-model query (see projections.views), reflecting every committed
        event; rows as dicts."""
        return await self._file(path).query(name, params)

    async def rebuild(self, path: str) -> tuple[int, dict[str, int]]:
        """Recreate every read model of ``path`` from its events."""
        return await self._file(path).rebuild()

    def pid(self) -> int:
        import os
        return os.getpid()

    def stats(self, path: str) -> dict:
        open_file = self._file(path)
        return {"path": path, "commits": open_file.commits,
                "position": open_file.store.last_position()}


def _outcome(result: Any) -> Any:
    from events.store import ConcurrencyError
    if isinstance(result, ConcurrencyError):
        return ("conflict", result.stream, result.expected, result.actual)
    if isinstance(result, BaseException):
        return ("error", type(result).__name__, str(result))
    return [(e.seq, e.position) for e in result]


@dataclass(frozen=True)
class StoreRef:
    """One file of the store actor, used like an actor handle: ``ref.append.remote(stream,
    events)`` calls the actor's ``append(path, stream, events)``. The methods are named one
    by one (no attribute forwarding), so a typo is an AttributeError here, not a remote one."""
    actor: Any
    path: str

    def _bound(self, name: str) -> _Method:
        return _Method(self.actor, name, self.path)

    open = property(lambda self: self._bound("open"))
    close = property(lambda self: self._bound("close"))
    append = property(lambda self: self._bound("append"))
    append_batch = property(lambda self: self._bound("append_batch"))
    read_stream = property(lambda self: self._bound("read_stream"))
    read_all = property(lambda self: self._bound("read_all"))
    list_streams = property(lambda self: self._bound("list_streams"))
    version = property(lambda self: self._bound("version"))
    verify = property(lambda self: self._bound("verify"))
    verify_all = property(lambda self: self._bound("verify_all"))
    head_anchor = property(lambda self: self._bound("head_anchor"))
    query = property(lambda self: self._bound("query"))
    rebuild = property(lambda self: self._bound("rebuild"))
    stats = property(lambda self: self._bound("stats"))


@dataclass(frozen=True)
class _Method:
    """One store-actor method with its file's path bound as the first argument."""
    actor: Any
    name: str
    path: str

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.actor, self.name).remote(self.path, *args, **kwargs)
