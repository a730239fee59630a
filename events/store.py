"""The append-only event store: one interface, shared semantics, small backends.

Semantics every backend gets from :class:`EventStore` (backends only move rows):
* ``append`` writes a batch whole or not at all, numbered 1..n per stream without gaps;
* ``expected_version`` makes an append conditional (optimistic concurrency);
* an ``idempotency_key`` seen before in the stream returns the events it stored, writing
  nothing -- a retried Ray call is harmless;
* every event is chained to the previous one of its stream. New events (chain version 2) are
  HMAC-SHA-256 under a key kept outside the store (events.chain) and cover their global
  position; events of older stores (chain 1, plain SHA-256) still verify;
* long texts are stored once, content-addressed, in a bodies table (events.bodies); every
  read and every append returns the full payloads;
* after every commit the store records a signed *head anchor* (last position, count, hash of
  the last event): ``verify`` then also sees the newest events cut off;
* ``verify_all`` checks the whole store in one pass in position order, in bounded memory, and
  can resume from a signed checkpoint (``incremental=True``).

What verify detects (with the key kept away from whoever edits the file): any edited,
inserted, removed or reordered event or body; swapped positions; a forged event (it cannot be
given a valid keyed hash, nor be passed off as an old unkeyed one after keyed events began);
the newest events removed (the anchor). What it cannot detect: a store rolled back *together
with* its anchor file to an earlier honest state, or everything deleted with the anchor --
keep an exported anchor (``ta-actors verify --anchor FILE``) elsewhere for that; and anything
done by someone who holds the key.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from events import bodies as lean_bodies
from events.chain import ChainKeyError, key_id, load_chain_key, sign, signature_ok
from events.envelope import (
    CHAIN_VERSION,
    GENESIS_HASH,
    NewEvent,
    RawEvent,
    StoredEvent,
    canonical_json,
    derived_event_id,
    keyed_chain_hash,
)
from events.errors import StoreError

if TYPE_CHECKING:
    from events.domain import DomainEvent

VERIFY_CHUNK = 10_000  # rows per query in verify_all: bounded memory whatever the store size
KNOWN_BODIES = 100_000  # body ids remembered as stored (skip re-inserting them)
KEY_MISMATCH = ("chain key does not match this store (set TA_ACTORS_CHAIN_KEY or the key file "
                "used when it was written)")


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


@dataclass(slots=True)
class VerifyReport:
    """The outcome of ``verify_all``: only problems are kept (one line each), never every
    stream's result, so the report stays small whatever the store size. ``stream`` of a
    problem is a stream name, or ``(positions)``, ``(anchor)``, ``(chain key)``,
    ``(checkpoint)`` for store-wide findings."""
    events: int = 0  # events checked
    streams: int = 0  # streams seen
    from_position: int = 0  # 0 for a full verify, else the checkpoint it started after
    last_position: int = 0
    anchor: str = "none"  # "ok", "none" (no anchor recorded), or "broken"
    checkpoint: int | None = None  # position of the checkpoint recorded by this verify
    #: the signed checkpoint a read-only store could not record (see ``record_checkpoint``)
    unrecorded_checkpoint: dict | None = None
    problems: list[VerifyResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict:
        return {"ok": self.ok, "streams": self.streams, "events": self.events,
                "from_position": self.from_position, "last_position": self.last_position,
                "incremental": self.from_position > 0, "anchor": self.anchor,
                "checkpoint": self.checkpoint,
                "problems": [{"stream": p.stream, "ok": p.ok, "checked": p.checked,
                              "problem": p.problem, "first_bad_seq": p.first_bad_seq}
                             for p in self.problems]}


Progress = Callable[[int, int], None]  # (events checked so far, events to check)


class EventStoreAPI(Protocol):
    """What callers may use of a store (both backends, and the store actor's file)."""

    def append(self, stream: str, events: Sequence[NewEvent], *,
               expected_version: int | None = None,
               idempotency_key: str | None = None) -> list[StoredEvent]: ...

    def append_batches(self, requests: Sequence[AppendRequest]
                       ) -> list[list[StoredEvent] | Exception]: ...

    def read_stream(self, stream: str, *, from_seq: int = 1,
                    to_seq: int | None = None) -> list[StoredEvent]: ...

    def read_all(self, *, after_position: int = 0, limit: int | None = None,
                 types: Sequence[str] | None = None) -> list[StoredEvent]: ...

    def version(self, stream: str) -> int: ...

    def last_position(self) -> int: ...

    def list_streams(self) -> list[StreamInfo]: ...

    def verify(self, stream: str) -> VerifyResult: ...

    def verify_all(self, *, progress: Progress | None = None, incremental: bool = False,
                   against: dict | None = None, checkpoint: bool = True) -> VerifyReport: ...

    def head_anchor(self) -> dict: ...

    def close(self) -> None: ...


class EventStore(ABC):
    """Shared append/read/verify logic; subclasses implement the ``_`` storage primitives."""

    read_only = False

    def __init__(self, *, chain_key: bytes | None = None) -> None:
        self._lock = threading.RLock()
        self._heads: dict[str, tuple[int, str]] = {}
        self._position: int | None = None
        self._count: int | None = None
        self._chain_key = chain_key
        self._store_key_id: str | None = None  # the key id recorded in the store, once read
        self._known_bodies: OrderedDict[str, None] = OrderedDict()
        # idempotency keys of recently used streams: most appends carry a key, and asking
        # the backend for each one cost more than the append itself
        self._keys: OrderedDict[str, set[str]] = OrderedDict()

    # ---- keys ---------------------------------------------------------------------------
    def _key(self, create: bool) -> bytes:
        if self._chain_key is None:
            self._chain_key = load_chain_key(create=create)
        return self._chain_key

    def _writer_key(self) -> tuple[bytes, str | None]:
        """The key to chain new events with, and the key id to record (first keyed append)
        -- or StoreError when this store was written with another key."""
        try:
            key = self._key(create=True)
        except ChainKeyError as exc:
            raise StoreError(str(exc)) from None
        if self._store_key_id is None:
            self._store_key_id = self._load_meta("chain_key_id")
        mine = key_id(key)
        if self._store_key_id is None:
            return key, mine
        if self._store_key_id != mine:
            raise StoreError(f"cannot append: {KEY_MISMATCH}")
        return key, None

    # ---- public API ---------------------------------------------------------------------
    def append(self, stream: str, events: Sequence[NewEvent], *,
               expected_version: int | None = None,
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
            if self.read_only:
                return [StoreError(f"event store {self._where()} is open read-only")
                        for _ in requests]
            try:
                key, new_key_id = self._writer_key()
            except StoreError as exc:
                return [exc for _ in requests]
            results: list[list[StoredEvent] | list[RawEvent] | Exception] = []
            rows: list[RawEvent] = []
            heads: dict[str, tuple[int, str]] = {}
            pending: dict[tuple[str, str], list[RawEvent]] = {}
            fresh: dict[str, DomainEvent] = {}  # event_id -> the payload just encoded
            new_bodies: dict[str, str] = {}
            position = self._max_position_cached()
            now = dt.datetime.now(dt.UTC)
            for req in requests:
                try:
                    planned = self._plan(req, heads, pending, position, now, key, new_bodies)
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
                to_store = new_bodies  # only accepted requests added theirs (end of _plan)
                meta = ({"chain_key_id": new_key_id,
                         "keyed_from": _signed_position(key, rows[0].position)}
                        if new_key_id else {})
                try:
                    count = self._count_cached()
                    self._insert(rows, to_store, meta)
                except Exception as exc:  # noqa: BLE001 - each caller learns its own outcome
                    self._heads.clear()
                    self._keys.clear()
                    self._position = None
                    self._count = None
                    # requests whose events were stored before (a retried call) still
                    # succeeded: only what this commit was to write failed
                    results = [exc if not isinstance(r, Exception) and r
                               and r[0].event_id in fresh else r for r in results]
                    fresh = {}
                else:
                    self._heads.update(heads)
                    for (stream, idem), _ in pending.items():
                        if stream in self._keys:
                            self._keys[stream].add(idem)
                    self._position = position
                    self._count = count + len(rows)
                    if new_key_id:
                        self._store_key_id = new_key_id
                    self._remember_bodies(to_store)
                    self._record_anchor(key, rows[-1])
            # new rows carry the (frozen, validated) payload they were encoded from: the
            # encoding keeps key order, so it equals what a later read decodes, and decoding it
            # again would cost a quarter of an append
            replayed = [r for r in results
                        if not isinstance(r, Exception) and r and r[0].event_id not in fresh]
            body_map = self._bodies_for(x for r in replayed for x in r)
            return [r if isinstance(r, Exception)
                    else [self._to_stored(x, fresh.get(x.event_id), body_map) for x in r]
                    for r in results]

    def read_stream(self, stream: str, *, from_seq: int = 1, to_seq: int | None = None
                    ) -> list[StoredEvent]:
        return self._decode_rows(self._raw_stream(stream, from_seq, to_seq))

    def read_all(self, *, after_position: int = 0, limit: int | None = None,
                 types: Sequence[str] | None = None) -> list[StoredEvent]:
        """Events of every stream in global order; ``types`` narrows to those event types."""
        return self._decode_rows(
            self._raw_all(after_position, limit, tuple(types) if types else None))

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
        rows = self._raw_stream(stream, 1, None)
        check = _Checker(self)
        found = check.bodies_of(rows)
        for expected_seq, row in enumerate(rows, start=1):
            if row.seq != expected_seq:
                return VerifyResult(stream, False, expected_seq, f"seq {expected_seq} is missing "
                                    f"(found seq {row.seq}): an event was removed", expected_seq)
            problem = check.row(row, (row.seq - 1, rows[expected_seq - 2].hash
                                      if expected_seq > 1 else GENESIS_HASH,
                                      rows[expected_seq - 2].chain if expected_seq > 1 else 1),
                                found)
            if problem:
                return VerifyResult(stream, False, expected_seq, problem, row.seq)
        return VerifyResult(stream, True, len(rows))

    def verify_all(self, *, progress: Progress | None = None, incremental: bool = False,
                   against: dict | None = None, checkpoint: bool = True) -> VerifyReport:
        """One pass over the store in position order, ``VERIFY_CHUNK`` rows at a time, keeping
        only each stream's head: every stream's chain, gapless global positions, bodies, the
        head anchor (and ``against``, an exported one). ``incremental`` starts after the last
        signed checkpoint instead of position 0. When everything is intact and the store is
        writable, a checkpoint is recorded at the last position checked."""
        report = VerifyReport()
        check = _Checker(self)
        check.load_key(report)
        heads: dict[str, tuple[int, str, int]] = {}  # stream -> (seq, hash, chain)
        broken: set[str] = set()
        start = self._checkpoint_start(report, check) if incremental else None
        last = start[0] if start else 0
        keyed_from = check.keyed_from()
        if start and start[1] >= 2:
            keyed_from = min(keyed_from or start[0], start[0])
        report.from_position = last
        end = self.last_position()
        report.last_position = end
        total = max(end - last, 0)
        gap_reported = False
        if progress:
            progress(0, total)
        window = last
        while window < end:  # fixed position windows: each read costs the same, gaps or not
            rows = self._raw_range(window, window + VERIFY_CHUNK)
            window += VERIFY_CHUNK
            if not rows:
                continue
            found = check.bodies_of(rows)
            for row in rows:
                report.events += 1
                if row.position != last + 1 and not gap_reported:
                    gap_reported = True
                    report.problems.append(VerifyResult(
                        "(positions)", False, report.events,
                        f"global position {last + 1} is missing: an event was removed"
                        if row.position > last + 1 else
                        f"global position {row.position} appears twice or out of order"))
                last = max(last, row.position)
                head = heads.get(row.stream)
                if head is None:
                    head = self._head_before(row) if start else (0, GENESIS_HASH, 1)
                    report.streams += 1
                if row.stream not in broken:
                    problem = check.row(row, head, found)
                    if (problem is None and keyed_from is not None and row.chain < 2
                            and row.position >= keyed_from):
                        problem = (f"event seq {row.seq} ({row.type}) has an unkeyed hash after "
                                   "keyed events began: forged")
                    if problem:
                        broken.add(row.stream)
                        report.problems.append(VerifyResult(row.stream, False, row.seq,
                                                            problem, row.seq))
                heads[row.stream] = (row.seq, row.hash, row.chain)
                if row.chain >= 2 and (keyed_from is None or row.position < keyed_from):
                    keyed_from = row.position
            if progress:
                progress(report.events, max(total, report.events))
        self._check_anchor(report, check, self._read_anchor(), "(anchor)", required=bool(
            keyed_from is not None or self._load_meta("chain_key_id")))
        if against is not None:
            self._check_anchor(report, check, against, "(exported anchor)", required=True)
        if report.ok and checkpoint and last > 0 and check.key:
            at = self._raw_range(last - 1, last)
            if at and at[0].position == last:
                point = check.sign_checkpoint(last, at[0].hash)
                if self.read_only:
                    report.unrecorded_checkpoint = point
                else:
                    self.record_checkpoint(point, report)
        return report

    def record_checkpoint(self, point: dict, report: VerifyReport) -> None:
        """Record a signed verify checkpoint (an optimisation for the next verify, never a
        reason to fail this one): lets a verify read through a read-only, memory-capped
        store and record its checkpoint afterwards."""
        with contextlib.suppress(StoreError, OSError):
            self._save_checkpoint(point)
            report.checkpoint = point["position"]
            report.unrecorded_checkpoint = None

    def head_anchor(self) -> dict:
        """The signed head of the store (for ``ta-actors verify --anchor FILE``)."""
        try:
            key = self._key(create=False)
        except ChainKeyError as exc:
            raise StoreError(f"cannot sign the store's head: {exc}") from None
        with self._lock:
            end = self._max_position_cached()
            last = self._raw_range(end - 1, end) if end else []
            return _anchor(key, end, self._count_cached(), last[0].hash if last else GENESIS_HASH)

    def close(self) -> None:  # noqa: B027 - optional hook, not abstract: memory has none
        """Release the backend; the default has nothing to release."""

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- shared internals ---------------------------------------------------------------
    def _where(self) -> str:
        return "(in memory)"

    def _plan(self, req: AppendRequest, heads: dict[str, tuple[int, str]],
              pending: dict[tuple[str, str], list[RawEvent]], position: int,
              now: dt.datetime, key: bytes, new_bodies: dict[str, str]) -> list[RawEvent]:
        if not req.events:
            raise ValueError(f"append to {req.stream!r}: empty batch")
        if not req.stream or len(req.stream) > 200:
            raise ValueError("stream name must be 1..200 characters")
        if req.idempotency_key is not None:
            existing = pending.get((req.stream, req.idempotency_key))
            if existing is None and req.idempotency_key in self._stream_keys(req.stream):
                existing = self._raw_by_key(req.stream, req.idempotency_key)
            if existing:
                return existing
        version, last_hash = heads.get(req.stream) or self._head(req.stream)
        if req.expected_version is not None and req.expected_version != version:
            raise ConcurrencyError(req.stream, req.expected_version, version)
        rows = []
        found: dict[str, str] = {}
        from events.codec import encode  # pydantic: not needed by read-model-only commands
        for i, new in enumerate(req.events):
            type_, schema_version, payload_json = encode(new.payload)
            payload_json, used = lean_bodies.lean(payload_json)
            found.update(used)
            seq = version + i + 1
            event_id = (derived_event_id(req.stream, req.idempotency_key, i)
                        if req.idempotency_key else derived_event_id(req.stream, "", seq))
            digest = keyed_chain_hash(key, last_hash, position + i + 1, req.stream, seq,
                                      event_id, type_, schema_version, now, new.actor,
                                      new.causation_id, req.idempotency_key, payload_json)
            rows.append(RawEvent(position + i + 1, event_id, req.stream, seq, type_,
                                 schema_version, now, new.actor, new.causation_id,
                                 req.idempotency_key, last_hash, digest, payload_json,
                                 chain=CHAIN_VERSION))
            last_hash = digest
        new_bodies.update((b, t) for b, t in found.items() if b not in self._known_bodies)
        return rows

    def _remember_bodies(self, ids: Iterable[str]) -> None:
        known = self._known_bodies
        for b in ids:
            known[b] = None
            known.move_to_end(b)
        while len(known) > KNOWN_BODIES:
            known.popitem(last=False)

    def _record_anchor(self, key: bytes, last: RawEvent) -> None:
        """Best effort after a commit: the anchor is a lower bound, never a reason to fail an
        append that is already durable."""
        with contextlib.suppress(OSError):  # a lower bound: the next commit writes it again
            self._write_anchor(_anchor(key, last.position, self._count_cached(), last.hash))

    def _check_anchor(self, report: VerifyReport, check: _Checker, anchor: dict | None,
                      label: str, required: bool) -> None:
        def problem(text: str) -> None:
            report.problems.append(VerifyResult(label, False, 0, text))
            if label == "(anchor)":
                report.anchor = "broken"

        if anchor is None:
            if required:
                problem(f"the head anchor {self._anchor_where()} is missing: removed newest "
                        "events could not be detected (check against an exported anchor with "
                        "verify --against FILE)")
            return
        try:
            position, count, digest = (int(anchor["position"]), int(anchor["count"]),
                                       str(anchor["hash"]))
            signature = str(anchor["signature"])
        except (KeyError, TypeError, ValueError):
            problem("the head anchor is unreadable (not a ta-actors anchor)")
            return
        if check.key is not None and not check.key_mismatch and not signature_ok(
                check.key, _anchor_text(position, count, digest), signature):
            problem("the head anchor's signature is invalid: it was not written with this "
                    "store's key, or it was edited")
            return
        at = self._raw_range(position - 1, position) if position > 0 else []
        if position > 0 and (not at or at[0].position != position):
            end = self.last_position()
            problem(f"the anchor records events up to position {position}, but "
                    + (f"the store ends at {end}: its newest events were removed"
                       if end < position else f"position {position} is missing"))
            return
        if position > 0 and at[0].hash != digest:
            problem(f"the event at position {position} is not the one the anchor recorded: "
                    "replaced or rewritten")
            return
        below = self._count_upto(position)
        if below != count:
            problem(f"the anchor counted {count} events up to position {position}, the store "
                    f"has {below}: events were removed" if below < count else
                    f"the anchor counted {count} events up to position {position}, the store "
                    f"has {below}: events were inserted")
            return
        if label == "(anchor)":
            report.anchor = "ok"

    def _checkpoint_start(self, report: VerifyReport, check: _Checker) -> tuple[int, int] | None:
        """(position, chain version there) of the last signed checkpoint, if it holds."""
        point = self._load_checkpoint()
        if point is None or check.key is None or check.key_mismatch:
            return None
        try:
            position, digest = int(point["position"]), str(point["hash"])
            good = signature_ok(check.key, _checkpoint_text(position, digest),
                                str(point["signature"]))
        except (KeyError, TypeError, ValueError):
            good = False
        if not good:
            report.problems.append(VerifyResult(
                "(checkpoint)", False, 0, "the verification checkpoint's signature is invalid "
                "(forged or edited); checked the whole store instead"))
            return None
        at = self._raw_range(position - 1, position)
        if not at or at[0].position != position or at[0].hash != digest:
            report.problems.append(VerifyResult(
                "(checkpoint)", False, 0, f"the event at the checkpoint (position {position}) "
                "changed since it was verified; checked the whole store instead"))
            return None
        return position, at[0].chain

    def _head_before(self, row: RawEvent) -> tuple[int, str, int]:
        """Incremental verify: the stream's event before ``row`` (checked by an earlier
        verify), read from the store."""
        if row.seq <= 1:
            return 0, GENESIS_HASH, 1
        prev = self._raw_stream(row.stream, row.seq - 1, row.seq - 1)
        if not prev:
            return row.seq - 2, GENESIS_HASH, 1  # reported as a missing seq
        return prev[0].seq, prev[0].hash, prev[0].chain

    def _stream_keys(self, stream: str) -> set[str]:
        """The idempotency keys used in ``stream`` (cached for recently used streams)."""
        keys = self._keys.get(stream)
        if keys is None:
            keys = self._keys[stream] = self._load_keys(stream)
            while len(self._keys) > 4096:
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(stream)
        return keys

    def _load_keys(self, stream: str) -> set[str]:
        """Backends may answer this with one indexed query; this default reads the stream."""
        return {r.idempotency_key for r in self._raw_stream(stream, 1, None)
                if r.idempotency_key is not None}

    def _head(self, stream: str) -> tuple[int, str]:
        if stream not in self._heads:
            self._heads[stream] = self._load_head(stream) or (0, GENESIS_HASH)
        return self._heads[stream]

    def _max_position_cached(self) -> int:
        if self._position is None:
            self._position = self._load_max_position()
        return self._position

    def _count_cached(self) -> int:
        if self._count is None:
            self._count = self._count_upto(None)
        return self._count

    def _bodies_for(self, rows: Iterable[RawEvent]) -> dict[str, str]:
        """One lookup for every body the rows refer to."""
        wanted: set[str] = set()
        for row in rows:
            if row.chain >= 2 and lean_bodies.may_refer(row.payload_json):
                wanted |= lean_bodies.refs_of(row.payload_json)
        return self._load_bodies(sorted(wanted)) if wanted else {}

    def _decode_rows(self, rows: list[RawEvent]) -> list[StoredEvent]:
        found = self._bodies_for(rows)
        return [self._to_stored(r, None, found) for r in rows]

    @staticmethod
    def _to_stored(row: RawEvent, payload: DomainEvent | None = None,
                   found: dict[str, str] | None = None) -> StoredEvent:
        if payload is None:
            from events.codec import EventDecodeError, decode  # late, like encode above
            where = f"{row.stream}#{row.seq}"
            text = row.payload_json
            if row.chain >= 2 and lean_bodies.may_refer(text):
                try:
                    text = lean_bodies.full_json(text, found or {})
                except lean_bodies.MissingBodyError as exc:
                    raise EventDecodeError(f"event {row.type!r} at {where}: {exc}") from None
                except ValueError:
                    pass  # not JSON: decode names the row
            payload = decode(row.type, row.schema_version, text, where=where)
        return StoredEvent(row.position, row.event_id, row.stream, row.seq, row.type,
                           row.schema_version, row.recorded_at, row.actor, row.causation_id,
                           row.idempotency_key, row.prev_hash, row.hash, payload, chain=row.chain)

    # ---- storage primitives -------------------------------------------------------------
    @abstractmethod
    def _load_head(self, stream: str) -> tuple[int, str] | None: ...

    @abstractmethod
    def _load_max_position(self) -> int: ...

    @abstractmethod
    def _count_upto(self, position: int | None) -> int:
        """How many events have a position <= ``position`` (all of them for None)."""

    @abstractmethod
    def _raw_by_key(self, stream: str, key: str) -> list[RawEvent]: ...

    @abstractmethod
    def _insert(self, rows: list[RawEvent], bodies: dict[str, str] | None = None,
                meta: dict[str, str] | None = None) -> None:
        """Write all rows, the new bodies and meta entries in one transaction, or none."""

    @abstractmethod
    def _raw_stream(self, stream: str, from_seq: int, to_seq: int | None) -> list[RawEvent]: ...

    @abstractmethod
    def _raw_all(self, after_position: int, limit: int | None,
                 types: tuple[str, ...] | None = None) -> list[RawEvent]: ...

    def _raw_range(self, after_position: int, upto_position: int) -> list[RawEvent]:
        """Events with ``after_position < position <= upto_position``, in position order."""
        return [r for r in self._raw_all(after_position, upto_position - after_position, None)
                if r.position <= upto_position]

    @abstractmethod
    def _stream_infos(self) -> list[StreamInfo]: ...

    @abstractmethod
    def _load_bodies(self, ids: list[str]) -> dict[str, str]: ...

    @abstractmethod
    def _load_meta(self, name: str) -> str | None: ...

    @abstractmethod
    def _read_anchor(self) -> dict | None: ...

    @abstractmethod
    def _write_anchor(self, anchor: dict) -> None: ...

    def _anchor_where(self) -> str:
        return "(kept in memory)"

    @abstractmethod
    def _load_checkpoint(self) -> dict | None: ...

    @abstractmethod
    def _save_checkpoint(self, point: dict) -> None: ...


class _Checker:
    """The per-event checks shared by ``verify`` (one stream: a key problem is that stream's
    problem) and ``verify_all`` (a key problem is reported once, as ``(chain key)``)."""

    def __init__(self, store: EventStore):
        self.store = store
        self.key: bytes | None = None
        self.key_problem: str | None = None  # why keyed hashes cannot be checked
        self.key_mismatch = False
        self.report: VerifyReport | None = None
        self._recorded: str | None = None
        self._loaded = False
        self._keyed_seen = False
        self._flagged: set[str | None] = set()

    def load_key(self, report: VerifyReport | None = None) -> None:
        self._loaded, self.report = True, report
        self._recorded = self.store._load_meta("chain_key_id")
        try:
            self.key = self.store._key(create=False)
        except ChainKeyError as exc:
            self.key_problem = f"keyed events cannot be checked: {exc}"
            if self._recorded is not None:
                self._flag()
            return
        if self._recorded is not None and self._recorded != key_id(self.key):
            self.key_mismatch, self.key_problem = True, KEY_MISMATCH
            self._flag()

    def keyed_from(self) -> int | None:
        """The first position written with a keyed chain, as the store recorded it (signed):
        an unkeyed event from there on is a forgery, even as the first event of a stream."""
        if not hasattr(self, "_keyed_from"):
            self._keyed_from: int | None = None
            value = self.store._load_meta("keyed_from")
            if value is not None:
                position, _, _ = value.partition(":")
                if not self._loaded:
                    self.load_key(self.report)
                try:
                    good = self.key is not None and not self.key_mismatch and \
                        _signed_position(self.key, int(position)) == value
                except ValueError:
                    good = False
                if not good and self.key is not None and not self.key_mismatch:
                    self.key_problem = ("the store's record of where keyed events begin was "
                                        "edited (its signature does not match)")
                    self._flag()
                    self.key_problem = None
                self._keyed_from = int(position) if position.isdigit() else None
        return self._keyed_from

    def _flag(self) -> None:
        """Report the key problem once for the whole store."""
        if self.report is not None and self.key_problem not in self._flagged:
            self._flagged.add(self.key_problem)
            self.report.problems.append(VerifyResult("(chain key)", False, 0, self.key_problem))

    def bodies_of(self, rows: list[RawEvent]) -> dict[str, str]:
        return self.store._bodies_for(rows)

    def row(self, row: RawEvent, head: tuple[int, str, int], found: dict[str, str]) -> str | None:
        """What is wrong with ``row`` given its stream's previous (seq, hash, chain), or None."""
        seq, prev_hash, prev_chain = head
        if row.seq != seq + 1:
            if row.seq > seq + 1:
                return (f"seq {seq + 1} is missing (found seq {row.seq} at position "
                        f"{row.position}): an event was removed")
            return (f"event seq {row.seq} at position {row.position} comes after seq {seq}: "
                    "duplicated or reordered")
        if row.prev_hash != prev_hash:
            return (f"event seq {row.seq} does not follow the previous event: removed, inserted "
                    "or reordered")
        if row.chain < prev_chain:
            return (f"event seq {row.seq} ({row.type}) has an unkeyed hash after keyed events "
                    "began: forged")
        if row.chain == 1:
            start = self.keyed_from()
            if start is not None and row.position >= start:
                return (f"event seq {row.seq} ({row.type}) has an unkeyed hash after keyed "
                        "events began: forged")
            if row.expected_hash() != row.hash:
                return self._altered(row)
        elif row.chain == 2:
            if not self._loaded:
                self.load_key()
            if self.key is None or self.key_mismatch:
                if self.report is None:
                    return self.key_problem
                self._flag()  # reported once for the store; the hash cannot be checked
            elif row.expected_hash(self.key) != row.hash:
                if not self._keyed_seen and self._recorded is None:
                    # no key id recorded (removed?): the first keyed event tells the key
                    self.key_mismatch, self.key_problem = True, KEY_MISMATCH
                    if self.report is None:
                        return KEY_MISMATCH
                    self._flag()
                else:
                    return self._altered(row)
            self._keyed_seen = True
        else:
            return f"event seq {row.seq} has an unknown chain version {row.chain}"
        if row.chain >= 2 and lean_bodies.may_refer(row.payload_json):
            for bid in sorted(lean_bodies.refs_of(row.payload_json)):
                text = found.get(bid)
                if text is None:
                    return f"event seq {row.seq} ({row.type}) refers to body {bid}, which is missing"
                if lean_bodies.body_id(text) != bid:
                    return (f"body {bid} of event seq {row.seq} ({row.type}) was altered: its "
                            "text no longer matches its address")
        return None

    @staticmethod
    def _altered(row: RawEvent) -> str:
        return (f"event seq {row.seq} ({row.type}) was altered: its content no longer matches "
                "its hash")

    def sign_checkpoint(self, position: int, digest: str) -> dict:
        assert self.key is not None
        return {"position": position, "hash": digest,
                "verified_at": dt.datetime.now(dt.UTC).replace(tzinfo=None),
                "signature": sign(self.key, _checkpoint_text(position, digest))}


def _signed_position(key: bytes, position: int) -> str:
    return f"{position}:{sign(key, canonical_json(['ta-actors keyed from', position]))}"


def _anchor_text(position: int, count: int, digest: str) -> str:
    return canonical_json(["ta-actors anchor", position, count, digest])


def _checkpoint_text(position: int, digest: str) -> str:
    return canonical_json(["ta-actors verify checkpoint", position, digest])


def _anchor(key: bytes, position: int, count: int, digest: str) -> dict:
    return {"format": 1, "position": position, "count": count, "hash": digest,
            "key_id": key_id(key), "signature": sign(key, _anchor_text(position, count, digest))}


def anchor_json(anchor: dict) -> str:
    return json.dumps(anchor, indent=2) + "\n"


def load_anchor_text(text: str) -> dict:
    """An exported anchor file's content (raises ValueError when it is not one)."""
    data: Any = json.loads(text)
    if not isinstance(data, dict) or "signature" not in data:
        raise ValueError("not a ta-actors anchor")
    return data
