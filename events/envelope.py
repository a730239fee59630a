"""The event envelope: what the store adds around a domain event, and the hash chain."""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: reading rows of a store needs no pydantic
    from events.domain import DomainEvent

GENESIS_HASH = "0" * 64
#: Chain version of every new event: HMAC-SHA-256 with the chain key, position included.
#: Version 1 (plain SHA-256, no position) is what stores written before it hold; it still
#: verifies, but nothing new is written with it.
CHAIN_VERSION = 2
_ID_NAMESPACE = uuid.UUID("8f2b1c1e-5d0a-4d59-9a55-2a3f6c0e7b11")


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event on its way into the store: the payload and who emitted it, in answer to what."""
    payload: DomainEvent
    actor: str
    causation_id: str | None = None


@dataclass(frozen=True, slots=True)
class Envelope:
    """What the store records around every payload."""
    position: int
    event_id: str
    stream: str
    seq: int
    type: str
    schema_version: int
    recorded_at: dt.datetime
    actor: str
    causation_id: str | None
    idempotency_key: str | None
    prev_hash: str
    hash: str
    chain: int = field(default=1, kw_only=True)  # how ``hash`` was made: 1 SHA-256, 2 HMAC


@dataclass(frozen=True, slots=True)
class RawEvent(Envelope):
    """A stored row as the backend keeps it: the payload is still its stored JSON text (for
    chain 2, the lean form: long texts are references to bodies, see events.bodies)."""
    payload_json: str

    def expected_hash(self, key: bytes | None = None) -> str:
        if self.chain == 1:
            return chain_hash(self.prev_hash, self.stream, self.seq, self.event_id, self.type,
                              self.schema_version, self.recorded_at, self.actor,
                              self.causation_id, self.idempotency_key, self.payload_json)
        if self.chain != 2:
            raise ValueError(f"unknown chain version {self.chain}")
        if key is None:
            raise ValueError("a chain-2 event needs the chain key to be checked")
        return keyed_chain_hash(key, self.prev_hash, self.position, self.stream, self.seq,
                                self.event_id, self.type, self.schema_version, self.recorded_at,
                                self.actor, self.causation_id, self.idempotency_key,
                                self.payload_json)


@dataclass(frozen=True, slots=True)
class StoredEvent(Envelope):
    """An event read back: envelope fields plus the parsed (and upcast) payload."""
    payload: DomainEvent

    def envelope(self) -> dict:
        return {"position": self.position, "event_id": self.event_id, "stream": self.stream,
                "seq": self.seq, "type": self.type, "schema_version": self.schema_version,
                "recorded_at": self.recorded_at.isoformat(), "actor": self.actor,
                "causation_id": self.causation_id, "idempotency_key": self.idempotency_key,
                "prev_hash": self.prev_hash, "hash": self.hash, "chain": self.chain}


def canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(prev_hash: str, stream: str, seq: int, event_id: str, type_: str,
               schema_version: int, recorded_at: dt.datetime, actor: str,
               causation_id: str | None, idempotency_key: str | None, payload_json: str) -> str:
    """SHA-256 over the canonical JSON of the envelope, a newline, and the payload's canonical
    JSON as stored, chained to the previous event (the payload text is hashed as it is, not
    escaped into another JSON document: the same guarantee at half the cost)."""
    envelope = canonical_json([prev_hash, stream, seq, event_id, type_, schema_version,
                               utc(recorded_at).isoformat(), actor, causation_id,
                               idempotency_key])
    digest = hashlib.sha256(envelope.encode())
    digest.update(b"\n")
    digest.update(payload_json.encode())
    return digest.hexdigest()


def keyed_chain_hash(key: bytes, prev_hash: str, position: int, stream: str, seq: int,
                     event_id: str, type_: str, schema_version: int, recorded_at: dt.datetime,
                     actor: str, causation_id: str | None, idempotency_key: str | None,
                     payload_json: str) -> str:
    """Chain version 2: HMAC-SHA-256 under the chain key of the canonical envelope (now with
    the global position and the chain version), a newline, and the stored payload text. Without
    the key nobody can make a hash that verifies: no forged append, no rewritten suffix, no
    swapped positions."""
    envelope = canonical_json(["ta-actors/2", prev_hash, position, stream, seq, event_id, type_,
                               schema_version, utc(recorded_at).isoformat(), actor,
                               causation_id, idempotency_key])
    mac = hmac.new(key, envelope.encode(), hashlib.sha256)
    mac.update(b"\n")
    mac.update(payload_json.encode())
    return mac.hexdigest()


def utc(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def derived_event_id(stream: str, idempotency_key: str, index: int) -> str:
    """Event id decided by the emitter's key: a retried append produces the same ids."""
    return str(uuid.uuid5(_ID_NAMESPACE, f"{stream}\x1f{idempotency_key}\x1f{index}"))
