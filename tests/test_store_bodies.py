"""The lean encoding on its own: any JSON payload comes back exactly, bodies are found from the
stored text without parsing it, and nothing in a payload can pass for a marker."""
from __future__ import annotations

import json
import random

from events import bodies as lean

WORDS = ["a" * 70, "b:AAAAAAAAAAAAAAAAAAAAAA", '"quoted" ]} text', "x\\y",
         '{"$text":["b:BBBBBBBBBBBBBBBBBBBBBB"]}', "short", "ü" * 80, "\n", ""]


def random_value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if r < 0.3 and depth < 3:
        return {rng.choice(["k", "$text", "$$x", "$y", "s"]): random_value(rng, depth + 1)
                for _ in range(rng.randint(1, 3))}
    if r < 0.5 and depth < 3:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if r < 0.55:
        return rng.choice([None, 1, 2.5, True])
    return "\n\n".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))


def test_random_payloads_round_trip_and_refs_are_exact():
    rng = random.Random(14)
    shared = 0
    for _ in range(2000):
        data = {"type": "X", "v": random_value(rng)}
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        stored, bodies = lean.lean(text)
        assert json.loads(lean.full_json(stored, bodies)) == data
        assert lean.refs_of(stored) == lean.parse(stored)[1] == set(bodies)
        assert all(lean.body_id(t) == b and len(b) == 22 for b, t in bodies.items())
        shared += bool(bodies)
    assert shared > 200  # the samples do exercise bodies


def test_what_is_split_and_what_stays_inline():
    text = '{"type":"TurnAssigned","turn_id":"t1","role":"bull","round":1}'
    assert lean.lean(text) == (text, {})
    medium = json.dumps({"type": "X", "s": "w" * lean.SPLIT_OVER}, separators=(",", ":"))
    assert lean.lean(medium) == (medium, {})  # not longer than SPLIT_OVER
    small_parts = json.dumps({"type": "X", "s": "\n\n".join(["p" * 40] * 6)},
                             separators=(",", ":"))
    assert lean.lean(small_parts) == (small_parts, {})  # long, but no paragraph >= BODY_MIN
    one = "q" * 300
    stored, bodies = lean.lean(json.dumps({"type": "X", "s": one}, separators=(",", ":")))
    assert stored == '{"type":"X","s":{"$text":["b:%s"]}}' % lean.body_id(one)
    assert bodies == {lean.body_id(one): one}
