"""Payload <-> stored JSON, with upcasting of old schema versions on read."""
from __future__ import annotations

import json
from collections.abc import Callable

from pydantic import ValidationError

from events.domain import EVENT_TYPES, DomainEvent

Upcaster = Callable[[dict], dict]

#: (type, from_version) -> function turning that version's dict into version + 1.
UPCASTERS: dict[tuple[str, int], Upcaster] = {}


class EventDecodeError(ValueError):
    """A stored row that does not parse back to a known event; names the row."""


def encode(payload: DomainEvent) -> tuple[str, int, str]:
    """The payload's canonical JSON: fields in schema order, mappings in the order they were
    recorded, no whitespace. Decoding it gives back an equal model with the same key order,
    so what an append returns and what a later read returns render identically."""
    if not isinstance(payload, DomainEvent):
        raise TypeError(f"not a domain event: {type(payload).__name__}")
    return payload.type, payload.SCHEMA_VERSION, payload.model_dump_json()


def decode(type_: str, version: int, payload_json: str, where: str = "") -> DomainEvent:
    cls = EVENT_TYPES.get(type_)
    label = f"event {type_!r}" + (f" at {where}" if where else "")
    if cls is None:
        raise EventDecodeError(f"{label}: unknown event type (known: {', '.join(EVENT_TYPES)})")
    if version == cls.SCHEMA_VERSION:  # the common case: parse and validate in one pass
        try:
            return cls.model_validate_json(payload_json)  # the row's type decides the class
        except ValidationError as exc:
            first = exc.errors()[0]
            if first["type"] == "json_invalid":
                raise EventDecodeError(f"{label}: payload is not JSON ({first['msg']})") from None
            loc = ".".join(str(p) for p in first["loc"])
            raise EventDecodeError(f"{label}: invalid payload ({loc}: {first['msg']})") from None
    try:
        data = json.loads(payload_json)
    except json.JSONDecodeError as exc:
        raise EventDecodeError(f"{label}: payload is not JSON ({exc})") from None
    while version < cls.SCHEMA_VERSION:
        step = UPCASTERS.get((type_, version))
        if step is None:
            raise EventDecodeError(f"{label}: no upcaster from schema version {version}")
        try:
            data, version = step(data), version + 1
        except Exception as exc:  # noqa: BLE001 - a broken old row must still name itself
            raise EventDecodeError(f"{label}: upcasting from schema version {version} failed "
                                   f"({type(exc).__name__}: {exc})") from exc
    if version > cls.SCHEMA_VERSION:
        raise EventDecodeError(f"{label}: schema version {version} is newer than this code "
                               f"({cls.SCHEMA_VERSION}); upgrade ta-actors")
    try:
        return cls.model_validate(data)  # the row's type decides the class, never the body
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise EventDecodeError(f"{label}: invalid payload ({loc}: {first['msg']})") from None
