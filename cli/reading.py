"""Commands that only read the store: replay, report, runs, stats, memory show."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cli import display
from cli.common import AddressOpt, JsonOpt, StoreOpt, command, fail, memory_command
from cli.options import default_store
from cli.running import write_files
from cli.stores import load_run, open_reader, read_run


@command
def replay(run_id: Annotated[str, typer.Argument(help="The run to audit.")],
           store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False) -> None:
    """Audit a run: timeline, hash-chain check, reports rebuilt, decision re-derived."""
    store = store or default_store()
    from cli.audit import audit
    reader = open_reader(store, address)
    try:
        events = read_run(reader, run_id, store)
        result = audit(run_id, events, reader.verify(run_id))
    finally:
        reader.close()
    if as_json:
        typer.echo(json.dumps(result.as_json(events), default=str))
    else:
        from projections.timeline import timeline
        console = display.out()
        console.print(display.timeline_table(timeline(events), run_id))
        for line in result.summary_lines():
            console.print(line, soft_wrap=True)
    if not (result.verified and result.decision_matches):
        raise typer.Exit(1)


@command
def report(run_id: Annotated[str, typer.Argument(help="The run to write up.")],
           out: Annotated[Optional[Path], typer.Option(help="Folder (default ./reports/RUN_ID).")] = None,
           store: StoreOpt = None, address: AddressOpt = None) -> None:
    """Write the run's reports as markdown: one file per role by stage, plus the complete one."""
    store = store or default_store()
    from projections.reports import render_reports
    from projections.run_state import project
    state = project(load_run(store, address, run_id))
    folder = out or Path("reports") / run_id
    files = render_reports(state)
    write_files(folder, files)
    typer.echo(f"wrote {len(files)} files to {folder}")


@command
def runs(store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False) -> None:
    """List runs with status, ticker, date and rating."""
    store = store or default_store()
    from projections.runs import RUN_SUMMARY_TYPES, summarize_runs
    if not store.exists() and not address:
        fail(f"no event store at {store}")
    reader = open_reader(store, address)
    try:
        rows = summarize_runs(reader.read_all(types=list(RUN_SUMMARY_TYPES)))
    finally:
        reader.close()
    if as_json:
        typer.echo(json.dumps([dataclasses.asdict(r) for r in rows], default=str, indent=2))
        return
    from rich.table import Table
    table = Table(title=f"runs in {store}")
    table.add_column("run id", no_wrap=True)
    for col in ("ticker", "date", "status", "rating", "updated"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.run_id, r.ticker, str(r.trade_date), r.status, r.rating or "-",
                      r.updated_at.strftime("%Y-%m-%d %H:%M:%S"))
    display.out().print(table)


@memory_command("show")
def memory_show(ticker: Annotated[Optional[str], typer.Option(help="Only this ticker.")] = None,
                store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False
                ) -> None:
    """Print the memory log: decisions, realised returns and alpha, reflections."""
    store = store or default_store()
    from events.config import validate_ticker
    from projections.memory import MEMORY_TYPES, memory_entries, render_log
    wanted = validate_ticker(ticker) if ticker else None
    reader = open_reader(store, address)
    try:
        entries = memory_entries(reader.read_all(types=list(MEMORY_TYPES)))
    finally:
        reader.close()
    entries = [m for m in entries if wanted is None or m.ticker == wanted]
    if as_json:
        typer.echo(json.dumps([{
            "run_id": m.run_id, "ticker": m.ticker, "trade_date": str(m.trade_date),
            "rating": m.rating, "resolved": m.resolved,
            "raw_return": m.outcome.raw_return if m.outcome else None,
            "alpha": m.outcome.alpha if m.outcome else None,
            "holding_days": m.outcome.holding_days if m.outcome else None,
            "reflection": m.reflection} for m in entries], indent=2))
    else:
        typer.echo(render_log(entries) or "(the memory log is empty)")



@command
def stats(by: Annotated[str, typer.Option(help="Group by model, provider, role, day or run.")] = "model",
          store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False) -> None:
    """Model usage across runs: calls, failures, retries, tokens, cost, latency."""
    from projections.usage import GROUPS, USAGE_TYPES, usage
    if by not in GROUPS:
        fail(f"cannot group by {by!r}; choose from {', '.join(GROUPS)}")
    store = store or default_store()
    reader = open_reader(store, address)
    try:
        rows = usage(reader.read_all(types=list(USAGE_TYPES)), by)
    finally:
        reader.close()
    if as_json:
        typer.echo(json.dumps([dataclasses.asdict(r) | {"mean_latency_ms": r.mean_latency_ms}
                               for r in rows], indent=2))
        return
    from rich.table import Table
    table = Table(title=f"model usage by {by}")
    for col in (by, "calls", "failed", "attempts", "tokens in", "tokens out", "cost $", "mean ms"):
        table.add_column(col, justify="left" if col == by else "right")
    for r in rows:
        table.add_row(r.key, str(r.calls), str(r.failed), str(r.attempts), f"{r.input_tokens:,}",
                      f"{r.output_tokens:,}", f"{r.cost_usd:.4f}", f"{r.mean_latency_ms:.0f}")
    display.out().print(table)


@command
def verify(store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False) -> None:
    """Check the whole store: every stream's hash chain, and no event missing anywhere."""
    store = store or default_store()
    reader = open_reader(store, address)
    try:
        results = reader.verify_all()
    finally:
        reader.close()
    broken = [r for r in results if not r.ok]
    if as_json:
        typer.echo(json.dumps({"ok": not broken, "streams": len(results) - 1,
                               "events": results[-1].checked,
                               "problems": [dataclasses.asdict(r) for r in broken]}, indent=2))
    else:
        for r in broken:
            display.err.print(f"[red]{r.stream}[/]: {r.problem}", soft_wrap=True)
        typer.echo(f"{len(results) - 1} streams, {results[-1].checked} events: "
                   + ("intact" if not broken else f"{len(broken)} problem(s)"))
    if broken:
        raise typer.Exit(1)
