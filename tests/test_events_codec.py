"""The codec turns stored text back into the exact event class or fails loudly, naming the row:
a silently skipped or misread event would corrupt every projection built on it."""
from __future__ import annotations

import json

import pytest

from events.codec import UPCASTERS, EventDecodeError, decode, encode
from events.domain import RunCompleted, TurnAssigned
from events.rating import Rating

TURN = json.dumps({"type": "TurnAssigned", "turn_id": "t1", "role": "bull", "round": 1})


def test_encode_is_canonical_and_rejects_non_events():
    type_, version, text = encode(TurnAssigned(turn_id="t1", role="bull"))
    assert (type_, version) == ("TurnAssigned", 1)
    assert text == '{"type":"TurnAssigned","turn_id":"t1","role":"bull","round":1}'
    assert encode(decode(type_, version, text))[2] == text  # stable: decode, encode, same text
    with pytest.raises(TypeError, match="not a domain event: dict"):
        encode({"type": "TurnAssigned"})


def test_unknown_type_names_the_type_and_the_row():
    with pytest.raises(EventDecodeError) as err:
        decode("TurnTaken", 1, TURN, where="run-1#7")
    assert "'TurnTaken' at run-1#7: unknown event type" in str(err.value)
    assert "TurnAssigned" in str(err.value)  # lists what is known


@pytest.mark.parametrize("payload,expected", [
    ('{"type": "TurnAssigned", "role": "bull"}', "turn_id: Field required"),
    ('{"type": "TurnAssigned", "turn_id": "t", "role": "bull", "extra": 1}',
     "extra: Extra inputs are not permitted"),
    ('{"type": "TurnAssigned", "turn_id": "t"', "payload is not JSON"),
    ("[1, 2]", "invalid payload"),
])
def test_invalid_payload_names_the_row_and_the_field(payload, expected):
    with pytest.raises(EventDecodeError) as err:
        decode("TurnAssigned", 1, payload, where="run-1#3")
    assert "'TurnAssigned' at run-1#3" in str(err.value)
    assert expected in str(err.value)


def test_payload_of_another_type_than_the_row_says_is_an_error():
    """The row's type column decides the class: a RunCompleted body in a TurnAssigned row is a
    corrupt row, not a RunCompleted (the exact class must come back, or an error)."""
    body = json.dumps({"type": "RunCompleted", "rating": "Buy"})
    with pytest.raises(EventDecodeError, match="'TurnAssigned' at run-1#2"):
        decode("TurnAssigned", 1, body, where="run-1#2")
    assert decode("RunCompleted", 1, body) == RunCompleted(rating=Rating.BUY)


def test_newer_schema_version_than_the_code_is_refused():
    with pytest.raises(EventDecodeError, match="schema version 2 is newer than this code"):
        decode("TurnAssigned", 2, TURN, where="run-1#1")


def test_missing_upcaster_is_named():
    with pytest.raises(EventDecodeError, match="no upcaster from schema version 0"):
        decode("TurnAssigned", 0, TURN, where="run-1#1")


def test_upcasters_chain_from_old_versions(monkeypatch):
    """v-1 had ``id``; v0 renamed it ``turn``; v1 (current) calls it ``turn_id``."""
    monkeypatch.setitem(UPCASTERS, ("TurnAssigned", -1),
                        lambda d: {**{k: v for k, v in d.items() if k != "id"}, "turn": d["id"]})
    monkeypatch.setitem(UPCASTERS, ("TurnAssigned", 0),
                        lambda d: {**{k: v for k, v in d.items() if k != "turn"},
                                   "turn_id": d["turn"]})
    old = json.dumps({"type": "TurnAssigned", "id": "t9", "role": "bear"})
    assert decode("TurnAssigned", -1, old) == TurnAssigned(turn_id="t9", role="bear")
    assert json.loads(old) == {"type": "TurnAssigned", "id": "t9", "role": "bear"}


def test_an_upcaster_that_fails_on_a_row_names_the_row(monkeypatch):
    monkeypatch.setitem(UPCASTERS, ("TurnAssigned", 0), lambda d: {**d, "turn_id": d["turn"]})
    with pytest.raises(EventDecodeError) as err:
        decode("TurnAssigned", 0, TURN, where="run-1#4")
    assert "'TurnAssigned' at run-1#4: upcasting from schema version 0 failed (KeyError" \
        in str(err.value)


def test_mapping_order_survives_the_store_so_reports_render_the_same():
    from events.domain import ToolCallCompleted
    from events.records import ToolResult
    event = ToolCallCompleted(turn_id="t", role="market", call_id="c", tool="get_indicators",
                              arguments={"symbol": "NVDA", "indicator": "rsi", "curr_date": "x"},
                              result=ToolResult(status="ok", text="42"))
    back = decode(*encode(event))
    assert back == event and list(back.arguments) == ["symbol", "indicator", "curr_date"]
