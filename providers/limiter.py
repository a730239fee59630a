"""Calls in flight per endpoint, with the time each call waited for its slot.

A plain asyncio limiter whose limit can change (the first call to a server learns its slot
count; a later run may pass ``--llm-concurrency``): calls already in flight keep their slots,
new ones see the new limit. Waiting happens before a try starts, so it is never part of a
timeout; the wait is returned so the call event can record it (``queued_ms``).
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator


class Limiter:
    def __init__(self, limit: int) -> None:
        self.limit = max(1, int(limit))
        self.in_flight = 0
        self.peak = 0
        self.waiting = 0
        self._changed = asyncio.Condition()

    async def set_limit(self, limit: int) -> None:
        async with self._changed:
            self.limit = max(1, int(limit))
            self._changed.notify_all()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """Hold one slot; yields the milliseconds spent waiting for it."""
        started = time.perf_counter()
        async with self._changed:
            self.waiting += 1
            try:
                await self._changed.wait_for(lambda: self.in_flight < self.limit)
            finally:
                self.waiting -= 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            yield (time.perf_counter() - started) * 1000
        finally:
            async with self._changed:
                self.in_flight -= 1
                self._changed.notify_all()
