"""One open event-store file inside the store actor: group commit and the recent-stream cache.

Appends that arrive together are committed in one transaction; each caller is answered once
its batch is durable. Streams of runs in flight are read many times (every turn reads its
run), so the decoded events of recently used streams are kept: events never change, and
every append to the file passes through here, so the copy is exact. Plain asyncio, no Ray.

Read models (events.views) live in the same file and follow the log a little behind it: the
events of group commits (in hand, decoded: no re-read) are applied together, at most
``VIEW_DELAY_S`` after they were committed or when ``VIEW_BATCH`` are waiting, in one
transaction per flush instead of one per commit. Every query, rebuild and close flushes
first, so a query reflects every committed event; a crash before a flush loses nothing,
since the views catch up from the log when the file is opened again.
"""
from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from typing import Any

from events.store import AppendRequest, EventStore
from events.views import ViewRecorder, open_views

RECENT_STREAMS = 128
VIEW_DELAY_S = 0.5
VIEW_BATCH = 2000


class OpenFile:
    def __init__(self, store: EventStore, views: Any = None):
        self.store = store
        self.views: ViewRecorder | None = open_views(store, views) if views else None
        self.commits = 0
        self._queue: list[tuple[AppendRequest, asyncio.Future]] = []
        self._writer: asyncio.Task | None = None
        self._recent: OrderedDict[str, list] = OrderedDict()  # stream -> all its events
        self._appends: dict[str, int] = {}  # stream -> appends so far (detects racing reads)
        self._unprojected: list = []  # committed events the views have not applied yet
        self._unprojected_lock = threading.Lock()
        self._flush_timer: asyncio.TimerHandle | None = None

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
                results = await asyncio.to_thread(self._commit, [req for req, _ in batch])
            except Exception as exc:  # noqa: BLE001 - every waiter learns the failure
                results = [exc] * len(batch)
            self.commits += 1
            if self._unprojected and self._flush_timer is None:
                self._flush_timer = asyncio.get_running_loop().call_later(
                    VIEW_DELAY_S, self._start_flush)
            for (request, future), result in zip(batch, results):
                if isinstance(result, Exception):
                    future.set_exception(result)
                else:
                    self._extend_recent(request.stream, result)
                    future.set_result(result)

    def _commit(self, requests: list[AppendRequest]) -> list:
        results = self.store.append_batches(requests)
        if self.views is not None:
            stored = [e for r in results if not isinstance(r, Exception) for e in r]
            with self._unprojected_lock:
                self._unprojected.extend(stored)
                due = len(self._unprojected) >= VIEW_BATCH
            if due:
                self._flush_views()
        return results

    def _flush_views(self) -> None:
        """Apply every committed event the views lack (in a worker thread)."""
        with self._unprojected_lock:
            events, self._unprojected = self._unprojected, []
        if self.views is None or not events:
            return
        try:
            self.views.after_commit(self.store, events)
        except Exception:  # noqa: BLE001 - the events are durable; the next query catches up
            import structlog
            structlog.get_logger().exception("read model update failed")

    def _start_flush(self) -> None:
        asyncio.ensure_future(self._flush_later())

    async def _flush_later(self) -> None:
        self._flush_timer = None
        await asyncio.to_thread(self._flush_views)

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
        cached = self._recent.get(stream)
        if cached is None:
            appends = self._appends.get(stream, 0)
            known: list = await asyncio.to_thread(self.store.read_stream, stream)
            if self._appends.get(stream, 0) == appends and known:  # no append raced the read
                self._recent[stream] = known
                while len(self._recent) > RECENT_STREAMS:
                    self._recent.popitem(last=False)
        else:
            known = cached
            self._recent.move_to_end(stream)
        return known[from_seq - 1:]

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A plain read of the store (read_all, list_streams, version, verify) in a thread."""
        return await asyncio.to_thread(getattr(self.store, method), *args, **kwargs)

    def _views(self) -> ViewRecorder:
        if self.views is None:
            raise RuntimeError("this store file was opened without read models")
        return self.views

    def _query(self, name: str, params: dict | None) -> list[dict]:
        views = self._views()
        self._flush_views()
        views.catch_up(self.store)
        return views.query(name, params)

    async def query(self, name: str, params: dict | None = None) -> list[dict]:
        """A named read-model query (projections.views), caught up first."""
        return await asyncio.to_thread(self._query, name, params)

    async def rebuild(self) -> tuple[int, dict[str, int]]:
        """Drop and rebuild every read model from events: (events read, rows per table)."""
        await asyncio.to_thread(self._flush_views)
        return await asyncio.to_thread(self._views().rebuild, self.store)

    async def close(self) -> None:
        """Close once pending appends are committed; reads still running in worker threads
        hold the store's lock, and DuckDB refuses to close a busy connection."""
        if self._writer is not None and not self._writer.done():
            await asyncio.wait([self._writer])
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self.views is not None:
            await asyncio.to_thread(self._flush_views)
            await asyncio.to_thread(self.views.close)
        await asyncio.to_thread(self.store.close)
