"""Errors as one line for humans: the one place that turns an exception (or a multi-line
text) into a single line fit for a terminal, an event field or a log line.

A leaf module: it imports nothing of ours, so every package may use it."""
from __future__ import annotations

__all__ = ["InvalidInput", "StoreError", "one_line", "flatten"]


class InvalidInput(ValueError):
    """Bad user input: the message is one line a user can act on."""


class StoreError(RuntimeError):
    """Base class of store errors; the message is meant for a user."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


def flatten(text: object, limit: int = 300) -> str:
    """All of ``text`` on one line: whitespace (newlines included) collapsed, cut to
    ``limit`` characters. For short multi-line details such as an HTTP error body."""
    return _cut(" ".join(str(text).split()), limit)


def one_line(error: BaseException | str, limit: int = 300) -> str:
    """The first line of an error, whitespace collapsed, cut to ``limit`` characters.

    An exception that wraps another (Ray's ``RayTaskError`` keeps the original in
    ``.cause``) is reported by its cause; an exception without a message by its type name.
    A traceback or a pydantic report is thus one line, never dozens."""
    if isinstance(error, BaseException):
        seen: set[int] = set()
        cause = getattr(error, "cause", None)
        while isinstance(cause, BaseException) and id(error) not in seen:
            seen.add(id(error))
            error, cause = cause, getattr(cause, "cause", None)
        text, name = str(error), type(error).__name__
    else:
        text, name = str(error), ""
    for line in text.splitlines():
        if line.strip():
            return _cut(" ".join(line.split()), limit)
    return name
