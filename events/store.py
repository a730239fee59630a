"""The append-only event store: one interface, shared semantics, small backends.

Semantics every backend gets from :class:`EventStore` (backends only move rows):
* ``append`` writes a batch whole or not at all, numbered 1..n per stream without gaps;
* ``expected_version`` makes an append conditional (optimistic concurrency);
* an ``idempotency_key`` seen before in the stream returns the events it stored, writing
  nothing -- a retried Ray call is harmless;
* every event is chained to the previous one of its stream by SHA-256, so ``verify`` can name
  the first altered, inserted or removed event.
"""
from __future__ import annotations

import datetime as dt
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from events.codec import decode, encode
from events.domain import DomainEvent
from events.envelope import (GENESIS_HASH, NewEvent, RawEvent, StoredEvent, chain_hash,
                             derived_event_id)


class StoreError(RuntimeError):
    """Base class of store errors; the message is meant for a user."""


class ConcurrencyError(StoreError):
    def __init__(self, stream: str, expected: int, actual: int):
        super().__init__(f"stream {stream!r} is at version {actual}, not the expected {expected}")
        self.stream, self.expected, self.actual = stream, expected, actual


class StoreLockedError(StoreError):
    """Another process holds the store file for writing."""


@dataclass(frozen=True, slots=True)
class AppendRequest:
    stream: str
    events: Sequence[NewEvent]
    expected_version: int | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class StreamInfo:
    stream: str
    version: int
    first_at: dt.datetime
    last_at: dt.datetime
    first_type: str
    last_type: str


@dataclass(frozen=True, slots=True)
class VerifyResult:
    stream: str
    ok: bool
    checked: int
    problem: str | None = None
    first_bad_seq: int | None = None


class EventStore(ABC):
    """Shared append/read/verify logic; subclasses implement the ``_`` storage primitives."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._heads: dict[str, tuple[int, str]] = {}
        self._position: int | None = None

    # ---- public API ---------------------------------------------------------------------
    def append(self, stream: str, events: Sequence[NewEvent], expected_version: int | None = None,
               idempotency_key: str | None = None) -> list[StoredEvent]:
        (result,) = self.append_batches(
            [AppendRequest(stream, events, expected_version, idempotency_key)])
        if isinstance(result, Exception):
            raise result
        return result

    def append_batches(self, requests: Sequence[AppendRequest]
                       ) -> list[list[StoredEvent] | Exception]:
        """Group commit: every valid request lands in one transaction; each gets its events or
        its own error (a conflict in one request does not fail the others)."""
        with self._lock:
            results: list[list[StoredEvent] | list[RawEvent] | Exception] = []
            rows: list[RawEvent] = []
            heads: dict[str, tuple[int, str]] = {}
            pending: dict[tuple[str, str], list[RawEvent]] = {}
            fresh: dict[str, DomainEvent] = {}  # event_id -> the payload just encoded
            position = self._max_position_cached()
            now = dt.datetime.now(dt.UTC)
            for req in requests:
                try:
                    planned = self._plan(req, heads, pending, position, now)
                except Exception as exc:  # noqa: BLE001 - returned to that caller only
                    results.append(exc)
                    continue
                if planned and planned[0].position <= position:  # idempotent replay
                    results.append(planned)
                    continue
                rows.extend(planned)
                fresh.update((row.event_id, new.payload) for row, new in zip(planned, req.events))
                position += len(planned)
                heads[req.stream] = (planned[-1].seq, planned[-1].hash)
                if req.idempotency_key is not None:
                    pending[(req.stream, req.idempotency_key)] = planned
                results.append(planned)
            if rows:
                try:
                    self._insert(rows)
                except Exception as exc:
                    self._heads.clear()
                    self._position = None
                    return [exc if not isinstance(r, Exception) else r for r in results]
                self._heads.update(heads)
                self._position = position
            # new rows carry the (frozen, validated) payload they were encoded from: the
            # encoding keeps key order, so it equals what a later read decodes, and decoding it
            # again would cost a quarter of an append
            return [r if isinstance(r, Exception)
                    else [self._to_stored(x, fresh.get(x.event_id)) for x in r]
                    for r in results]

    def read_stream(self, stream: str, from_seq: int = 1, to_seq: int | None = None
                    ) -> list[StoredEvent]:
        return [self._to_stored(r) for r in self._raw_stream(stream, from_seq, to_seq)]

    def read_all(self, after_position: int = 0, limit: int | None = None,
                 types: Sequence[str] | None = None) -> list[StoredEvent]:
        """Events of every stream in global order; ``types`` narrows to those event types."""
        return [self._to_stored(r)
                for r in self._raw_all(after_position, limit, tuple(types) if types else None)]

    def version(self, stream: str) -> int:
        with self._lock:
            return self._head(stream)[0]

    def last_position(self) -> int:
        with self._lock:
            return self._max_position_cached()

    def list_streams(self) -> list[StreamInfo]:
        return self._stream_infos()

    def verify(self, stream: str) -> VerifyResult:
        """Recompute the stream's hash chain; name the first event that does not fit."""
        prev, checked = GENESIS_HASH, 0
        for expected_seq, row in enumerate(self._raw_stream(stream, 1, None), start=1):
            checked += 1
            if row.seq != expected_seq:
                return VerifyResult(stream, False, checked, f"seq {expected_seq} is missing "
                                    f"(found seq {row.seq}): an event was removed", expected_seq)
            if row.prev_hash != prev:
                return VerifyResult(stream, False, checked, f"event seq {row.seq} does not follow "
                                    "the previous event: removed, inserted or reordered", row.seq)
            if row.expected_hash() != row.hash:
                return VerifyResult(stream, False, checked, f"event seq {row.seq} ({row.type}) was "
                                    "altered: its content no longer matches its hash", row.seq)
            prev = row.hash
        return VerifyResult(stream, True, checked)

    def verify_all(self) -> list[VerifyResult]:
        """Every stream's chain, then the global positions: one writer numbers them 1, 2, 3 …
        without gaps, so a missing position is a removed event even where a stream's chain
        cannot tell (its newest events cut off). Only the store's very last event can go
        unnoticed."""
        results = [self.verify(info.stream) for info in self.list_streams()]
        gap = self._first_missing_position()
        results.append(VerifyResult(
            "(positions)", gap is None, self.last_position(),
            None if gap is None else f"global position {gap} is missing: an event was removed",
            None))
        return results

    def close(self) -> None:
        """Release the backend; the default has nothing to release."""

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- shared internals ---------------------------------------------------------------
    def _plan(self, req: AppendRequest, heads: dict[str, tuple[int, str]],
              pending: dict[tuple[str, str], list[RawEvent]], position: int,
              now: dt.datetime) -> list[RawEvent]:
        if not req.events:
            raise ValueError(f"append to {req.stream!r}: empty batch")
        if not req.stream or len(req.stream) > 200:
            raise ValueError("stream name must be 1..200 characters")
        if req.idempotency_key is not None:
            existing = (pending.get((req.stream, req.idempotency_key))
                        or self._raw_by_key(req.stream, req.idempotency_key))
            if existing:
                return existing
        version, last_hash = heads.get(req.stream) or self._head(req.stream)
        if req.expected_version is not None and req.expected_version != version:
            raise ConcurrencyError(req.stream, req.expected_version, version)
        rows = []
        for i, new in enumerate(req.events):
            type_, schema_version, payload_json = encode(new.payload)
            seq = version + i + 1
            event_id = (derived_event_id(req.stream, req.idempotency_key, i)
                        if req.idempotency_key else derived_event_id(req.stream, "", seq))
            digest = chain_hash(last_hash, req.stream, seq, event_id, type_, schema_version, now,
                                new.actor, new.causation_id, req.idempotency_key, payload_json)
            rows.append(RawEvent(position + i + 1, event_id, req.stream, seq, type_,
                                 schema_version, now, new.actor, new.causation_id,
                                 req.idempotency_key, last_hash, digest, payload_json))
            last_hash = digest
        return rows

    def _head(self, stream: str) -> tuple[int, str]:
        if stream not in self._heads:
            self._heads[stream] = self._load_head(stream) or (0, GENESIS_HASH)
        return self._heads[stream]

    def _max_position_cached(self) -> int:
        if self._position is None:
            self._position = self._load_max_position()
        return self._position

    @staticmethod
    def _to_stored(row: RawEvent, payload: DomainEvent | None = None) -> StoredEvent:
        if payload is None:
            payload = decode(row.type, row.schema_version, row.payload_json,
                             where=f"{row.stream}#{row.seq}")
        return StoredEvent(row.position, row.event_id, row.stream, row.seq, row.type,
                           row.schema_version, row.recorded_at, row.actor, row.causation_id,
                           row.idempotency_key, row.prev_hash, row.hash, payload)

    # ---- storage primitives -------------------------------------------------------------
    @abstractmethod
    def _load_head(self, stream: str) -> tuple[int, str] | None: ...

    @abstractmethod
    def _load_max_position(self) -> int: ...

    @abstractmethod
    def _raw_by_key(self, stream: str, key: str) -> list[RawEvent]: ...

    @abstractmethod
    def _insert(self, rows: list[RawEvent]) -> None:
        """Write all rows in one transaction, or none of them."""

    @abstractmethod
    def _raw_stream(self, stream: str, from_seq: int, to_seq: int | None) -> list[RawEvent]: ...

    @abstractmethod
    def _raw_all(self, after_position: int, limit: int | None,
                 types: tuple[str, ...] | None = None) -> list[RawEvent]: ...

    @abstractmethod
    def _stream_infos(self) -> list[StreamInfo]: ...

    @abstractmethod
    def _first_missing_position(self) -> int | None:
        """The smallest position in 1..max that no stored event has, or None."""
