"""In-memory backend: the reference for the store contract, and fast for unit tests."""
from __future__ import annotations

from collections import defaultdict

from events.envelope import RawEvent
from events.store import EventStore, StreamInfo


class InMemoryEventStore(EventStore):
    def __init__(self) -> None:
        super().__init__()
        self._rows: list[RawEvent] = []
        self._by_stream: dict[str, list[RawEvent]] = defaultdict(list)

    def _load_head(self, stream: str) -> tuple[int, str] | None:
        rows = self._by_stream.get(stream)
        return (rows[-1].seq, rows[-1].hash) if rows else None

    def _load_max_position(self) -> int:
        return self._rows[-1].position if self._rows else 0

    def _raw_by_key(self, stream: str, key: str) -> list[RawEvent]:
        return [r for r in self._by_stream.get(stream, ()) if r.idempotency_key == key]

    def _insert(self, rows: list[RawEvent]) -> None:
        for row in rows:  # validate everything before touching state: all or nothing
            if not isinstance(row, RawEvent):
                raise TypeError("not a RawEvent")
        self._rows.extend(rows)
        for row in rows:
            self._by_stream[row.stream].append(row)

    def _raw_stream(self, stream: str, from_seq: int, to_seq: int | None) -> list[RawEvent]:
        return [r for r in self._by_stream.get(stream, ())
                if r.seq >= from_seq and (to_seq is None or r.seq <= to_seq)]

    def _raw_all(self, after_position: int, limit: int | None,
                 types: tuple[str, ...] | None = None) -> list[RawEvent]:
        rows = [r for r in self._rows
                if r.position > after_position and (types is None or r.type in types)]
        return rows[:limit] if limit is not None else rows

    def _stream_infos(self) -> list[StreamInfo]:
        return [StreamInfo(s, rows[-1].seq, rows[0].recorded_at, rows[-1].recorded_at,
                           rows[0].type, rows[-1].type)
                for s, rows in self._by_stream.items() if rows]

    def _first_missing_position(self) -> int | None:
        for expected, row in enumerate(self._rows, start=1):
            if row.position != expected:
                return expected
        return None
