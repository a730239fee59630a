"""Token, cost and latency accounting folded from LLM call events: per model, provider,
role, day or run — the numbers behind budgets and `ta-actors stats`."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from events.envelope import StoredEvent

USAGE_TYPES = ("LLMCallCompleted", "LLMCallFailed")

#: How a call is grouped, by name (data, not an if-ladder).
GROUPS: dict[str, Callable[[StoredEvent], str]] = {
    "model": lambda e: e.payload.model,
    "provider": lambda e: getattr(e.payload, "provider", None) or e.payload.model.partition("/")[0],
    "role": lambda e: e.payload.role,
    "day": lambda e: e.recorded_at.date().isoformat(),
    "run": lambda e: e.stream,
}


@dataclass(frozen=True, slots=True)
class UsageRow:
    key: str
    calls: int = 0
    failed: int = 0
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0

    @property
    def mean_latency_ms(self) -> float:
        return self.latency_ms / self.calls if self.calls else 0.0


def usage(events: Iterable[StoredEvent], by: str = "model") -> list[UsageRow]:
    from events import domain as d  # late: read-model queries need no pydantic
    if by not in GROUPS:
        raise ValueError(f"cannot group by {by!r}; choose from {', '.join(GROUPS)}")
    rows: dict[str, UsageRow] = {}
    for e in events:
        p = e.payload
        if not isinstance(p, d.LLMCallCompleted | d.LLMCallFailed) or e.actor == "fork":
            continue  # a fork's copies were paid for once, by the run they came from
        key = GROUPS[by](e)
        row = rows.get(key) or UsageRow(key)
        tries = max(1, len(p.attempts))
        if isinstance(p, d.LLMCallFailed):
            row = replace(row, failed=row.failed + 1, attempts=row.attempts + tries)
        else:
            row = replace(row, calls=row.calls + 1, attempts=row.attempts + tries,
                          input_tokens=row.input_tokens + p.input_tokens,
                          output_tokens=row.output_tokens + p.output_tokens,
                          cost_usd=row.cost_usd + p.cost_usd,
                          latency_ms=row.latency_ms + p.latency_ms)
        rows[key] = row
    return sorted(rows.values(), key=lambda r: r.key)
