"""Prompts that fit a model's context window: a token estimate and a condensing ladder.

Pure functions, no I/O. A role builds its messages for a ``Condensing`` level; ``fit`` walks
``LADDER`` from "nothing cut" to "everything cut that may be cut" and returns the first
level whose messages fit the budget. What may be cut, in order: tool results keep only their
newest rows; the oldest debate turns become their first sentence; analyst reports, the
investment plan and the trade proposal are cut to their first sentences. The verified snapshot and the task are never cut. The level is
recorded on the call event (``condensed``), so the audit shows what the model did not see.

Tokens are estimated, not counted: ``CHARS_PER_TOKEN`` is 3.0 characters per token, lower
than English prose (about 4) because prompts here are dense with numbers and dates, which
tokenize worse; a few tokens per message cover the chat template. A server whose tokenizer
can be measured gets its own ratio (llama.cpp's ``/tokenize`` of a sample, and the prompt
tokens of earlier replies; small models that spend a token per digit come out near 1.5).
Being conservative costs some context; being optimistic would send a prompt the server
must reject.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from events.records import Message, ToolSpec

CHARS_PER_TOKEN = 3.0
TOKENS_PER_MESSAGE = 8


#: Tokens the gateway adds to a prompt beyond its messages: the language instruction and a
#: structure hint join the system message, and the chat template wraps every message.
WIRE_TOKENS = 200


def estimate_tokens(messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *,
                    chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """A conservative token count of a prompt: its characters over ``chars_per_token``
    (``CHARS_PER_TOKEN`` unless the server's tokenizer was measured)."""
    chars = sum(len(m.content) + sum(len(json.dumps(c.arguments)) + len(c.name)
                                     for c in m.tool_calls) for m in messages)
    chars += sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters))
                 for t in tools)
    return math.ceil(chars / chars_per_token) + TOKENS_PER_MESSAGE * len(messages)


def reply_reserve(window: int) -> int:
    """Tokens kept free for the reply (sent as max_tokens): a sixteenth of the window, at
    least 256 and at most 4,096 (a small local model writes ~10-100 tokens/s on a laptop
    CPU, and rambles when let)."""
    return min(4096, max(256, window // 16))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(*#-])")


def first_sentences(text: str, limit: int) -> str:
    """The whole sentences of ``text`` that fit in ``limit`` characters (at least the first
    sentence, itself cut at ``limit``), marked as cut when anything was left out."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    sentences = _SENTENCE_END.split(flat)
    kept = sentences[0][:limit]
    for sentence in sentences[1:]:
        if len(kept) + 1 + len(sentence) > limit:
            break
        kept = f"{kept} {sentence}"
    return f"{kept} […]"


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (at most 300 characters)."""
    flat = " ".join(text.split())
    sentence = _SENTENCE_END.split(flat, maxsplit=1)[0][:300]
    return sentence if sentence == flat else f"{sentence} […]"


def trim_rows(text: str, rows: int) -> str:
    """A tool result with only its newest ``rows`` data rows: heading lines (``#``) and a
    column header stay; data rows are listed oldest first, so the last ones are kept."""
    lines = text.splitlines()
    head = [ln for ln in lines[:2] if ln.startswith("#") or (ln and not any(
        ch.isdigit() for ch in ln))]
    body = [ln for ln in lines[len(head):] if ln.strip()]
    if len(body) <= rows:
        return text
    cut = len(body) - rows
    return "\n".join(head + [f"({cut} older rows cut to fit the model's context)"]
                     + body[-rows:])


@dataclass(frozen=True)
class Condensing:
    """How much of a prompt to cut. None: nothing of that kind is cut."""
    tool_rows: int | None = None  # tool results keep their newest N data rows
    whole_speeches: int | None = None  # the newest N debate turns stay whole; older: 1 sentence
    #: analyst reports, the investment plan, the trade proposal and the latest arguments
    #: answered keep their first sentences up to N characters
    report_chars: int | None = None

    def describe(self) -> list[str]:
        """What this level cuts, for the call event."""
        cuts = []
        if self.tool_rows is not None:
            cuts.append(f"tool results to their newest {self.tool_rows} rows")
        if self.whole_speeches is not None:
            cuts.append(f"debate turns before the newest {self.whole_speeches} to their "
                        "first sentence")
        if self.report_chars is not None:
            cuts.append(f"analyst reports, the plan, the proposal and the latest arguments "
                        f"to their first {self.report_chars} characters")
        return cuts


#: From nothing cut to everything cut that may be cut; ``fit`` takes the first that fits.
LADDER: tuple[Condensing, ...] = (
    Condensing(),
    Condensing(tool_rows=20),
    Condensing(tool_rows=20, whole_speeches=2),
    Condensing(tool_rows=10, whole_speeches=1),
    Condensing(tool_rows=10, whole_speeches=0, report_chars=1600),
    Condensing(tool_rows=5, whole_speeches=0, report_chars=800),
    Condensing(tool_rows=3, whole_speeches=0, report_chars=400),
    Condensing(tool_rows=2, whole_speeches=0, report_chars=160),
)


def trim_tool_messages(messages: Sequence[Message], level: Condensing) -> list[Message]:
    """``messages`` with every tool result trimmed to the level's rows."""
    if level.tool_rows is None:
        return list(messages)
    return [m.model_copy(update={"content": trim_rows(m.content, level.tool_rows)})
            if m.role == "tool" else m for m in messages]


@dataclass(frozen=True)
class Fitted:
    messages: list[Message]
    level: Condensing
    tokens: int  # the estimate of the prompt sent


def fit(build: Callable[[Condensing], list[Message]], *, budget: int,
        tools: Sequence[ToolSpec] = (), chars_per_token: float = CHARS_PER_TOKEN
        ) -> Fitted | None:
    """The first level of ``LADDER`` whose messages (``build(level)``) fit ``budget``
    tokens; None when even the last does not (the caller must not send it)."""
    for level in LADDER:
        messages = build(level)
        tokens = estimate_tokens(messages, tools, chars_per_token=chars_per_token)
        if tokens <= budget:
            return Fitted(messages, level, tokens)
    return None
