"""Decision schemas on the wire, and the deterministic free-text fallback.

A deciding role asks for a schema; the gateway asks the model natively (json_schema response
format, else a forced tool) when the capability table allows. Whatever comes back, the reply
carries a dict that validates: when the model could not comply, the reply's own text is turned
into the schema with ``parse_rating`` / ``parse_action`` (no extra model call), so a weak model
never blocks a run and replay re-derives the same decision.
"""
from __future__ import annotations

import copy
import json
import re
from enum import Enum
from typing import Any, get_args

from pydantic import ValidationError

from events.decisions import DECISION_SCHEMAS, Decision
from events.rating import Rating, TraderAction, parse_action, parse_rating
from events.sentiment import Confidence, SentimentBand, parse_band, parse_confidence
from providers.base import LLMError


def schema_class(name: str) -> type[Decision]:
    try:
        return DECISION_SCHEMAS[name]
    except KeyError:
        raise LLMError(f"unknown output schema {name!r}; known: {', '.join(DECISION_SCHEMAS)}",
                       "config") from None


def strict_json_schema(name: str) -> dict[str, Any]:
    """The pydantic schema made acceptable to strict structured-output APIs: refs inlined,
    every property required (optional ones are nullable already), no extra properties."""
    raw = schema_class(name).model_json_schema()
    defs = raw.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]]))
            out = {k: walk(v) for k, v in node.items() if k not in ("default", "title")}
            if out.get("type") == "object" and "properties" in out:
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(raw)


def response_format(name: str) -> dict[str, Any]:
    return {"type": "json_schema",
            "json_schema": {"name": name, "schema": strict_json_schema(name), "strict": True}}


def tool_name(name: str) -> str:
    """The function a model is asked to call to hand in a decision ("submit_TradeProposal")."""
    return f"submit_{name}"


def schema_tool(name: str) -> dict[str, Any]:
    cls = schema_class(name)
    doc = (cls.__doc__ or "").strip() or f"Submit the {name}."
    return {"type": "function", "function": {
        "name": tool_name(name), "description": f"Submit your final {name}. {doc}"[:1000],
        "parameters": strict_json_schema(name)}}


def validate(name: str, data: Any) -> dict[str, Any] | None:
    """``data`` (a dict or JSON text) as a validated, JSON-ready dict, or None."""
    if isinstance(data, str):
        data = loads_lenient(data)
    if not isinstance(data, dict):
        return None
    try:
        return schema_class(name).model_validate(data).model_dump(mode="json")
    except ValidationError:
        return None


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def loads_lenient(text: str) -> Any:
    """JSON from model text: plain, inside a ```json fence, or the outermost {...}."""
    text = (text or "").strip()
    candidates = [text]
    fenced = _FENCE.search(text)
    if fenced:
        candidates.append(fenced.group(1))
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{"): text.rindex("}") + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
    return None


def _label_section(text: str, field: str) -> str | None:
    """The text after a "Field Name:" / "**Field Name**:" label, up to the next label."""
    label = field.replace("_", " ")
    match = re.search(rf"(?im)^[\s*#]*{re.escape(label)}[\s*]*:[\s*]*(.+?)(?=^[\s*#]*[A-Z][\w ]"
                      rf"{{2,40}}[\s*]*:|\Z)", text, re.DOTALL)
    value = match.group(1).strip() if match else ""
    return value or None


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
#: How a free-text reply yields each enum field: the scales' own deterministic parsers.
_ENUM_PARSERS: dict[type[Enum], Any] = {
    Rating: parse_rating, TraderAction: parse_action, SentimentBand: parse_band,
    Confidence: parse_confidence}


def from_freetext(name: str, text: str) -> dict[str, Any]:
    """A valid ``name`` object built from free text, deterministically.

    Enum fields come from their scale's parser (``_ENUM_PARSERS``: ratings, trader actions,
    sentiment bands, confidence); text fields take their labelled section ("Rationale: ...")
    or else the whole text; numbers take a labelled number or stay empty (a number the
    schema refuses, e.g. a score out of range, is dropped too). Works for any schema made of
    those field types.
    """
    cls = schema_class(name)
    body = (text or "").strip() or "(the model returned no text)"
    values: dict[str, Any] = {}
    for field_name, info in cls.model_fields.items():
        kinds = set(get_args(info.annotation)) | {info.annotation}
        section = _label_section(body, field_name)
        parser = next((p for kind, p in _ENUM_PARSERS.items() if kind in kinds), None)
        if parser is not None:
            values[field_name] = parser(body).value
        elif any(isinstance(k, type) and issubclass(k, Enum) for k in kinds):
            continue  # an enum we do not know how to parse: leave it to its default
        elif float in kinds or int in kinds:
            number = _NUMBER.search(section or "")
            values[field_name] = float(number.group().replace(",", "")) if number else None
        elif info.is_required():
            values[field_name] = section or body
        else:
            values[field_name] = section
    values.update(getattr(cls, "freetext_fields", lambda _: {})(body))  # a schema's own line
    try:
        return cls.model_validate(values).model_dump(mode="json")
    except ValidationError:  # a parsed number the schema refuses: as if none was given
        numbers = {k: None for k, info in cls.model_fields.items()
                   if {float, int} & (set(get_args(info.annotation)) | {info.annotation})}
        return cls.model_validate({**values, **numbers}).model_dump(mode="json")


def render(name: str, data: dict[str, Any]) -> str:
    """Markdown of a validated decision (the schema's own renderer)."""
    return schema_class(name).model_validate(data).render()
