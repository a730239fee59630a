"""Error text for humans without secrets: redaction of API keys and one-line error text.

Provider SDK errors sometimes echo the key they were given ("Incorrect API key provided:
sk-..."); anything that reaches an event, a log line or the terminal goes through here.
Imports only the key map (a leaf) and ``events.errors``, so ``providers.base`` imports it
normally: no cycle."""
from __future__ import annotations

import re

from events.errors import flatten
from providers.keys import secret_values

__all__ = ["redact", "one_line"]

_SECRET_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{6,}|sk-ant-[A-Za-z0-9_\-]{6,}|AKIA[0-9A-Z]{12,}|"
    r"(?i:bearer)\s+[A-Za-z0-9._\-]{8,}|"
    r"(?i:api[_-]?key)[\"']?\s*[:=]\s*[\"']?(?=[^\s\"',}]*\d)[^\s\"',}]{12,})")


def redact(text: str) -> str:
    """``text`` with every known API-key value and key-shaped token replaced by ``***``."""
    for value in secret_values():
        text = text.replace(value, "***")
    return _SECRET_SHAPES.sub("***", text)


def one_line(text: object, limit: int = 300) -> str:
    """Collapse whitespace and cut to ``limit`` characters, redacted: error text for humans."""
    return flatten(redact(str(text)), limit)
