"""Terminal rendering: live progress, the final table, the replay timeline. Everything shown
is a projection of the events, so the screen can never disagree with the record.

Text that comes from a run (model output, refusal reasons, tickers, paths) is printed as is:
never read as rich markup ("[/]" would crash, "[bold]" would style) or emoji (":bear:")."""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # the read-model commands print tables without loading any event model
    from projections.run_state import RunState
    from projections.timeline import TimelineRow

#: stderr: progress, warnings, errors. Its markup is ours only: data goes through ``plain``.
err = Console(stderr=True, highlight=False, emoji=False)


def out() -> Console:
    """Console for results on stdout; wide when piped so ids and event names stay whole.
    It prints data only: no markup, no emoji."""
    console = Console(highlight=False, emoji=False, markup=False)
    return console if console.is_terminal else Console(highlight=False, emoji=False,
                                                       markup=False, width=200)


def plain(value: object) -> Text:
    """``value`` as literal text for a table cell or a print: no markup, no emoji."""
    return Text(str(value))


def _row(table: Table, *cells: object) -> None:
    table.add_row(*(plain(c) for c in cells))


def total_turns(s: RunState) -> int:
    c = s.config
    if c is None:
        return 0
    return len(c.analysts) + 2 * c.debate_rounds + 2 + 3 * c.risk_rounds + 1


def current_roles(s: RunState) -> str:
    if s.finished:
        return s.status
    from projections.schedule import next_step
    step = next_step(s)
    if step.kind == "prepare":
        return "resolving context"
    return ", ".join(t.role for t in step.turns) or step.kind


def streaming_cell(streams: list[dict], run_id: str) -> str:
    """The calls of one run streaming now: "market 41 tok/s (230 tok)" per role."""
    parts = []
    for row in streams:
        if row.get("run_id") != run_id:
            continue
        rate = row.get("tokens_per_s")
        speed = f"{rate:.0f} tok/s" if rate is not None else "waiting for 1st token"
        parts.append(f"{row['role']} {speed} ({row.get('tokens', 0)} tok)")
    return ", ".join(parts) or "-"


def progress_table(states: dict[str, RunState], started: float,
                   streams: list[dict] | None = None) -> Table:
    """One row per run; with ``streams`` (the gateway's calls streaming now) a column of
    tokens/s per role."""
    table = Table(title=f"ta-actors · {time.monotonic() - started:5.1f} s", expand=False)
    columns = ["ticker", "now", "turns", "LLM", "tools", "tokens", "rating"]
    if streams is not None:
        columns.insert(2, "streaming")
    for col in columns:
        table.add_column(col)
    for run_id, s in states.items():
        if s.config is None:
            continue
        cells: list[object] = [s.ticker, current_roles(s), f"{len(s.answered)}/{total_turns(s)}",
                               s.usage.llm_calls, s.usage.tool_calls, f"{s.usage.tokens:,}",
                               s.rating or "-"]
        if streams is not None:
            cells.insert(2, streaming_cell(streams, run_id))
        _row(table, *cells)
    return table


def final_table(rows: list[dict]) -> Table:
    table = Table(title="ta-actors results")
    for col in ("ticker", "date", "rating", "status"):
        table.add_column(col)
    table.add_column("run id", no_wrap=True)
    table.add_column("reports", overflow="fold")
    for r in rows:
        status = r["status"] if r["status"] != "failed" else f"failed: {r.get('reason') or ''}"
        _row(table, r["ticker"], r["trade_date"], r.get("rating") or "-", status, r["run_id"],
             r.get("reports") or "-")
    return table


def timeline_table(rows: list[TimelineRow], run_id: str) -> Table:
    table = Table(title=plain(f"timeline of {run_id}"))
    for col in ("seq", "time", "actor", "event", "summary"):
        table.add_column(col, overflow="fold")
    for r in rows:
        _row(table, r.seq, r.recorded_at, r.actor, r.type, r.summary)
    return table


def grounding_table(checks: Sequence[Any], run_id: str) -> Table:
    """One row per role output: its figures by verdict, and the flagged ones as written."""
    table = Table(title=plain(f"grounding of {run_id}"))
    for col in ("role", "turn", "model", "figures", "grounded", "derived", "ungrounded",
                "look-ahead", "flagged figures"):
        table.add_column(col, overflow="fold",
                         justify="right" if col in ("figures", "grounded", "derived",
                                                    "ungrounded", "look-ahead") else "left")
    for c in checks:
        flagged = ", ".join(f"{raw} ({kind.replace('_', '-')})" for raw, kind in c.flagged)
        _row(table, c.role, c.turn_id, c.model, c.checked, c.grounded, c.derived, c.ungrounded,
             c.look_ahead, flagged or "-")
    return table
