"""The one actor that owns the DuckDB file. Appends that arrive together are committed in one
transaction (group commit); each caller is answered once its batch is durable.

Streams of runs in flight are read many times (every turn reads its run), so the actor keeps
the decoded events of recently used streams: events never change, and every append passes
through here, so the copy is exact."""
from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

import ray

from events.store import AppendRequest


RECENT_STREAMS = 128


@ray.remote(num_cpus=0, max_concurrency=1000)
class EventStoreActor:
    def __init__(self, path: str):
        from events.duckdb_store import DuckDBEventStore  # duckdb lives in this process only
        from events.store import StoreError
        self.path = path
        self.error: str | None = None
        try:
            self._store = DuckDBEventStore(path)
        except StoreError as exc:  # kept, so callers get one clear line instead of a dead actor
            self.error, self._store = str(exc), None
        self._queue: list[tuple[AppendRequest, asyncio.Future]] = []
        self._writer: asyncio.Task | None = None
        self.commits = 0
        self._recent: OrderedDict[str, list] = OrderedDict()  # stream -> all its events
        self._appends: dict[str, int] = {}  # stream -> appends so far (detects racing reads)

    async def append(self, stream: str, events: list, expected_version: int | None = None,
                     idempotency_key: str | None = None) -> list:
        future = asyncio.get_running_loop().create_future()
        self._queue.append((AppendRequest(stream, events, expected_version, idempotency_key),
                            future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                results = await asyncio.to_thread(self._store.append_batches,
                                                  [req for req, _ in batch])
            except Exception as exc:  # noqa: BLE001 - every waiter learns the failure
                results = [exc] * len(batch)
            self.commits += 1
            for (request, future), result in zip(batch, results):
                if isinstance(result, Exception):
                    future.set_exception(result)
                else:
                    self._extend_recent(request.stream, result)
                    future.set_result(result)

    def _extend_recent(self, stream: str, stored: list) -> None:
        self._appends[stream] = self._appends.get(stream, 0) + 1
        known = self._recent.get(stream)
        if known is None or not stored:
            return
        if stored[0].seq == len(known) + 1:
            known.extend(stored)
        elif stored[-1].seq > len(known):  # a gap we cannot explain: read it again next time
            del self._recent[stream]

    async def read_stream(self, stream: str, from_seq: int = 1) -> list:
        known = self._recent.get(stream)
        if known is None:
            appends = self._appends.get(stream, 0)
            known = await asyncio.to_thread(self._store.read_stream, stream, 1)
            if self._appends.get(stream, 0) == appends and known:  # no append raced the read
                self._recent[stream] = known
                while len(self._recent) > RECENT_STREAMS:
                    self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(stream)
        return known[from_seq - 1:]

    async def read_all(self, after_position: int = 0, limit: int | None = None,
                       types: list[str] | None = None) -> list:
        return await asyncio.to_thread(self._store.read_all, after_position, limit, types)

    async def list_streams(self) -> list:
        return await asyncio.to_thread(self._store.list_streams)

    async def version(self, stream: str) -> int:
        return await asyncio.to_thread(self._store.version, stream)

    async def verify(self, stream: str) -> Any:
        return await asyncio.to_thread(self._store.verify, stream)

    def open_error(self) -> str | None:
        """Why the store could not be opened (e.g. another process holds the file), or None."""
        return self.error

    def stats(self) -> dict:
        return {"path": self.path, "commits": self.commits,
                "position": self._store.last_position()}

    async def close(self) -> bool:
        """Close the file once pending appends are committed. Reads and appends of turns still
        in flight (e.g. other analysts of a run that just failed) may be using the connection
        from worker threads; DuckDB refuses to close a busy connection, so wait for them."""
        if self._store is None:
            return True
        if self._writer is not None and not self._writer.done():
            await asyncio.wait([self._writer])
        await asyncio.to_thread(self._store.close)  # waits for threads still reading
        return True
