"""In-memory backend: the reference for the store contract, and fast for unit tests."""
from __future__ import annotations

import os
from collections import defaultdict

from events.envelope import RawEvent
from events.store import EventStore, StreamInfo


class InMemoryEventStore(EventStore):
    """Without ``chain_key`` the store makes a random one: it lives as long as the store."""

    def __init__(self, *, chain_key: bytes | None = None) -> None:
        super().__init__(chain_key=chain_key if chain_key is not None else os.urandom(32))
        self._rows: list[RawEvent] = []
        self._by_stream: dict[str, list[RawEvent]] = defaultdict(list)
        self._bodies: dict[str, str] = {}
        self._meta: dict[str, str] = {}
        self._anchor: dict | None = None
        self._checkpoints: list[dict] = []

    def _load_head(self, stream: str) -> tuple[int, str] | None:
        rows = self._by_stream.get(stream)
        return (rows[-1].seq, rows[-1].hash) if rows else None

    def _load_max_position(self) -> int:
        return max((r.position for r in self._rows), default=0)

    def _count_upto(self, position: int | None) -> int:
        if position is None:
            return len(self._rows)
        return sum(1 for r in self._rows if r.position <= position)

    def _raw_by_key(self, stream: str, key: str) -> list[RawEvent]:
        return [r for r in self._by_stream.get(stream, ()) if r.idempotency_key == key]

    def _insert(self, rows: list[RawEvent], bodies: dict[str, str] | None = None,
                meta: dict[str, str] | None = None) -> None:
        for row in rows:  # validate everything before touching state: all or nothing
            if not isinstance(row, RawEvent):
                raise TypeError("not a RawEvent")
        self._rows.extend(rows)
        self._rows.sort(key=lambda r: r.position)  # injected rows may come out of order
        for row in rows:
            self._by_stream[row.stream].append(row)
            self._by_stream[row.stream].sort(key=lambda r: r.seq)
        for bid, text in (bodies or {}).items():
            self._bodies.setdefault(bid, text)
        for name, value in (meta or {}).items():
            self._meta.setdefault(name, value)

    def _raw_stream(self, stream: str, from_seq: int, to_seq: int | None) -> list[RawEvent]:
        return [r for r in self._by_stream.get(stream, ())
                if r.seq >= from_seq and (to_seq is None or r.seq <= to_seq)]

    def _raw_all(self, after_position: int, limit: int | None,
                 types: tuple[str, ...] | None = None) -> list[RawEvent]:
        rows = [r for r in self._rows
                if r.position > after_position and (types is None or r.type in types)]
        return rows[:limit] if limit is not None else rows

    def _raw_range(self, after_position: int, upto_position: int) -> list[RawEvent]:
        return [r for r in self._rows if after_position < r.position <= upto_position]

    def _stream_infos(self) -> list[StreamInfo]:
        return [StreamInfo(s, rows[-1].seq, rows[0].recorded_at, rows[-1].recorded_at,
                           rows[0].type, rows[-1].type)
                for s, rows in self._by_stream.items() if rows]

    def _load_bodies(self, ids: list[str]) -> dict[str, str]:
        return {b: self._bodies[b] for b in ids if b in self._bodies}

    def _load_meta(self, name: str) -> str | None:
        return self._meta.get(name)

    def _read_anchor(self) -> dict | None:
        return dict(self._anchor) if self._anchor is not None else None

    def _write_anchor(self, anchor: dict) -> None:
        self._anchor = dict(anchor)

    def _load_checkpoint(self) -> dict | None:
        return dict(self._checkpoints[-1]) if self._checkpoints else None

    def _save_checkpoint(self, point: dict) -> None:
        self._checkpoints.append(dict(point))
