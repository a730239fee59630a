"""Value records carried inside events: market facts, LLM messages and usage, tool calls."""
from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Instrument(Record):
    """Who the ticker is. ``available`` is False when no vendor knew it (fail-open)."""
    ticker: str
    symbol: str
    name: str | None = None
    sector: str | None = None
    industry: str | None = None
    exchange: str | None = None
    currency: str | None = None
    vendor: str | None = None
    available: bool = True
    note: str | None = None


class Bar(Record):
    date: dt.date
    open: float
    high: float
    low: float
    close: float
    volume: float


class MarketSnapshot(Record):
    """Deterministic facts for the trade date: the source of truth for exact numbers."""
    symbol: str
    trade_date: dt.date
    last_bar: Bar
    indicators: dict[str, float | None]
    recent_closes: list[tuple[dt.date, float]]
    vendor: str

    def render(self) -> str:
        b = self.last_bar
        lines = [f"VERIFIED MARKET SNAPSHOT for {self.symbol} (vendor {self.vendor}); last bar "
                 f"{b.date} on or before trade date {self.trade_date}:",
                 f"open {b.open:.2f} high {b.high:.2f} low {b.low:.2f} close {b.close:.2f} "
                 f"volume {b.volume:,.0f}"]
        lines += [f"{k}: {'n/a' if v is None else f'{v:.4f}'}" for k, v in self.indicators.items()]
        lines.append("recent closes: " + ", ".join(f"{d} {c:.2f}" for d, c in self.recent_closes))
        return "\n".join(lines)


class ToolSpec(Record):
    """A tool offered to a model, in JSON-schema form (OpenAI function shape)."""
    name: str
    description: str
    parameters: dict[str, Any]


class ToolCall(Record):
    id: str
    name: str
    arguments: dict[str, Any]


class Message(Record):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class Attempt(Record):
    """One try of a model call; failed tries stay visible in the event."""
    number: int
    error: str | None = None
    status: int | None = None
    waited_s: float = 0.0


class ToolResult(Record):
    status: Literal["ok", "no_data", "error"]
    text: str
    vendor: str | None = None
