"""The request/reply contract between role actors and the LLM gateway.

Requests and replies are frozen pydantic values so they can cross a Ray boundary and be
recorded verbatim in an ``LLMCallCompleted`` event: replay and resume never call a model
again, they read these back.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from events.decisions import OutputMode
from events.records import Attempt, Message, ToolCall, ToolSpec
from providers.keys import env_is_set, provider_of
from providers.redaction import one_line, redact

__all__ = ["ErrorKind", "RETRYABLE", "LLMRequest", "LLMReply", "LLMError", "provider_of",
           "env_is_set", "one_line", "redact"]

ErrorKind = Literal["auth", "bad_request", "rate_limit", "timeout", "server", "config",
                    "not_found", "context"]
#: Kinds worth another try: the same request may succeed a moment later.
RETRYABLE: frozenset[str] = frozenset({"rate_limit", "timeout", "server"})


class LLMRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str  # "provider/model", e.g. "offline/quick", "openai/gpt-4.1-mini"
    messages: list[Message]
    tools: list[ToolSpec] = []
    output_schema: str | None = None  # key of events.decisions.DECISION_SCHEMAS
    role: str
    tier: Literal["quick", "deep"] = "quick"
    base_url: str | None = None
    temperature: float | None = None
    #: overall cap on one try, streaming included; None: the gateway's default for the
    #: endpoint (generous for local servers, which may be slow but steady)
    timeout_s: float | None = None
    #: a try fails only after no chunk has arrived for this long (waiting for a slot is not
    #: counted: it happens before the try starts)
    idle_timeout_s: float = 120.0
    max_retries: int = 3
    output_language: str = "English"
    offline_latency_s: float = 0.0
    run_id: str | None = None  # shown in the live progress of streaming calls
    max_output_tokens: int | None = None  # sent as max_tokens when set
    #: the prompt budget the caller fitted the messages to; the gateway refuses to send a
    #: request whose estimate exceeds it (a prompt the server would have to reject)
    context_window: int | None = None
    chars_per_token: float = 3.0  # the ratio the caller estimated the prompt with
    concurrency: int | None = None  # calls in flight on this endpoint (--llm-concurrency)

    @property
    def provider(self) -> str:
        return provider_of(self.model)


class LLMReply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    tool_calls: list[ToolCall]
    structured: dict | None  # set iff the request named an output_schema; always validates
    output_mode: OutputMode
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_ms: float
    attempts: list[Attempt]
    provider: str
    model: str
    queued_ms: float = 0.0  # waiting for a slot on the endpoint, never part of a timeout
    stream_chunks: int = 0  # chunks the reply arrived in (0: not streamed)
    first_chunk_ms: float | None = None  # from the request to the first chunk


class LLMError(Exception):
    """A model call that failed for good. ``kind`` says what to do about it (fix the key, fix
    the request, wait, ...); ``attempts`` keeps every try for the event record.

    ``str()`` is one line without any API key in it.
    """

    def __init__(self, message: str, kind: ErrorKind = "server",
                 attempts: list[Attempt] | None = None, status: int | None = None) -> None:
        self.message = one_line(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.attempts: list[Attempt] = list(attempts or [])
        self.retry_after: float | None = None  # seconds the provider asked us to wait
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"

    def __reduce__(self):  # survives pickling across Ray with its fields
        return (self.__class__._rebuild, (self.message, self.kind, self.attempts, self.status))

    @classmethod
    def _rebuild(cls, message, kind, attempts, status):
        err = cls.__new__(cls)
        LLMError.__init__(err, message, kind, attempts, status)
        return err

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

