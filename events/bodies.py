"""Lean events: long texts are stored once, by content address, and referenced from payloads.

A model call's event records every message it sent, so a turn's later calls repeat its
earlier messages and every debater's prompt repeats the analysts' reports. The store keeps
the domain models unchanged and does this generically, on the stored JSON text:

* every JSON string longer than :data:`SPLIT_OVER` characters is split into paragraphs on
  ``"\\n\\n"``; each paragraph of at least :data:`BODY_MIN` characters is a *body*, stored once
  in the ``bodies`` table under its address, the others stay inline;
* the string is replaced by a marker ``{"$text": ["s:<inline text>", "b:<id>", ...]}``,
  whose parts joined with ``"\\n\\n"`` give back the exact string (neighbouring inline
  paragraphs are merged into one part);
* a body's address (*id*) is the SHA-256 of its UTF-8 text, truncated to its first 128 bits
  and written in unpadded base64url (22 characters): short references, and still 2^128 work
  to find another text with the same id (2^64 to make two colliding texts on purpose);
* real payload dicts whose keys start with ``$`` get one more ``$`` in front of each such key
  (``"$text"`` is stored as ``"$$text"``), so no payload can pass for a marker.

The hash chain covers the lean text, so it covers the body ids, and ``verify`` checks every
referenced body against its id: together that is the full text. This format is the one of
chain version 2 rows; rows of chain 1 (written before) are plain JSON and decode unchanged.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

SPLIT_OVER = 200
BODY_MIN = 64
MARK = "$text"
#: a run of SPLIT_OVER characters without a quote: the only texts worth walking (JSON outside
#: strings has no such runs except long number arrays; a long string full of escaped quotes
#: may be missed, which only leaves it inline)
_MAYBE_LONG = re.compile(r'[^"]{%d,}' % SPLIT_OVER)


class MissingBodyError(ValueError):
    """A payload refers to a body the store does not have."""


def body_id(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def lean(payload_json: str) -> tuple[str, dict[str, str]]:
    """The stored form of a payload's JSON and the bodies it refers to (id -> text)."""
    if '"$' not in payload_json and (len(payload_json) <= SPLIT_OVER
                                     or not _MAYBE_LONG.search(payload_json)):
        return payload_json, {}  # no string is long, no key starts with "$"
    bodies: dict[str, str] = {}
    changed = [False]
    out = _lean(json.loads(payload_json), bodies, changed)
    if not changed[0]:
        return payload_json, {}
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")), bodies


def _lean(value: Any, bodies: dict[str, str], changed: list[bool]) -> Any:
    if isinstance(value, str):
        return _split(value, bodies, changed) if len(value) > SPLIT_OVER else value
    if isinstance(value, list):
        return [_lean(v, bodies, changed) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k.startswith("$"):
                k, changed[0] = "$" + k, True
            out[k] = _lean(v, bodies, changed)
        return out
    return value


def _split(text: str, bodies: dict[str, str], changed: list[bool]) -> Any:
    parts: list[str] = []
    inline: list[str] = []
    for paragraph in text.split("\n\n"):
        if len(paragraph) >= BODY_MIN:
            if inline:
                parts.append("s:" + "\n\n".join(inline))
                inline = []
            bid = body_id(paragraph)
            bodies[bid] = paragraph
            parts.append("b:" + bid)
        else:
            inline.append(paragraph)
    if inline:
        parts.append("s:" + "\n\n".join(inline))
    if len(parts) == 1 and parts[0].startswith("s:"):
        return text  # nothing long enough to share
    changed[0] = True
    return {MARK: parts}


def may_refer(payload_json: str) -> bool:
    """Cheap test: can this stored (chain 2) payload hold markers or escaped keys?"""
    return '"$' in payload_json


def parse(payload_json: str) -> tuple[Any, set[str]]:
    """A lean payload parsed, and the body ids it refers to."""
    data = json.loads(payload_json)
    refs: set[str] = set()
    _refs(data, refs)
    return data, refs


def _refs(value: Any, refs: set[str]) -> None:
    if isinstance(value, dict):
        parts = value.get(MARK) if len(value) == 1 else None
        if isinstance(parts, list):
            refs.update(p[2:] for p in parts if isinstance(p, str) and p.startswith("b:"))
            return
        for v in value.values():
            _refs(v, refs)
    elif isinstance(value, list):
        for v in value:
            _refs(v, refs)


#: a marker in stored text: {"$text":[ JSON strings ]} -- a real key "$text" is stored as
#: "$$text", and inside a JSON string every quote is escaped, so this only matches markers
_MARKER = re.compile(r'\{"\$text":\[((?:"[^"\\]*(?:\\.[^"\\]*)*",?)*)\]\}')
#: a body reference: a whole element of a marker's list
_REF = re.compile(r'(?<=[\[,])"b:([A-Za-z0-9_-]{22})"(?=[,\]])')


def refs_of(payload_json: str) -> set[str]:
    """The body ids a stored payload refers to (read from the text, without parsing it)."""
    if not may_refer(payload_json):
        return set()
    refs: set[str] = set()
    for marker in _MARKER.finditer(payload_json):
        refs.update(_REF.findall("[" + marker.group(1) + "]"))
    return refs


def restore(data: Any, bodies: dict[str, str]) -> Any:
    """The original JSON value of a parsed lean payload (markers resolved, keys unescaped)."""
    if isinstance(data, dict):
        parts = data.get(MARK) if len(data) == 1 else None
        if isinstance(parts, list):
            out = []
            for p in parts:
                if p.startswith("b:"):
                    try:
                        out.append(bodies[p[2:]])
                    except KeyError:
                        raise MissingBodyError(f"body {p[2:]} is missing") from None
                else:
                    out.append(p[2:])
            return "\n\n".join(out)
        return {(k[1:] if k.startswith("$$") else k): restore(v, bodies) for k, v in data.items()}
    if isinstance(data, list):
        return [restore(v, bodies) for v in data]
    return data


def full_json(payload_json: str, bodies: dict[str, str]) -> str:
    """The original payload JSON text of a lean one. Markers are replaced in the text itself
    (each one's small list parsed on its own): a whole parse and re-serialisation is only
    needed when an escaped ``$`` key has to be unescaped."""
    if not may_refer(payload_json):
        return payload_json
    if '"$$' in payload_json:
        return json.dumps(restore(json.loads(payload_json), bodies), ensure_ascii=False,
                          separators=(",", ":"))

    def text(marker: re.Match) -> str:
        return json.dumps(restore({MARK: json.loads("[" + marker.group(1) + "]")}, bodies),
                          ensure_ascii=False)
    return _MARKER.sub(text, payload_json)
