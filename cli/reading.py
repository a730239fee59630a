"""Commands that read the store: replay, report, verify (the events themselves); runs, stats,
memory show (read models, kept as tables); rebuild (the read models, from the events)."""
from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli import display
from cli.common import (AddressOpt, JsonOpt, StoreOpt, check_out_dir, command, default_store, fail,
                        memory_command)
from cli.running import write_files
from cli.stores import load_run, open_reader, read_run


@command
def replay(run_id: Annotated[str, typer.Argument(help="The run to audit.")],
           store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False) -> None:
    """Audit a run: timeline, hash-chain check, reports rebuilt, decision re-derived."""
    store = store or default_store()
    from projections.backtest import is_backtest_id
    if is_backtest_id(run_id):  # a backtest's own stream (cli/backtest.py)
        from cli.backtest import replay_backtest
        replay_backtest(run_id, store=store, address=address, as_json=as_json)
        return
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
        if result.grounding:
            console.print(display.grounding_table(result.grounding, run_id))
        for line in result.summary_lines():
            console.print(line, soft_wrap=True)
    if not (result.verified and result.decision_matches):
        raise typer.Exit(1)


@command
def report(run_id: Annotated[str, typer.Argument(help="The run to write up.")],
           out: Annotated[Optional[Path], typer.Option(help="Folder (default ./reports/RUN_ID).")] = None,
           store: StoreOpt = None, address: AddressOpt = None) -> None:
    """Write the run's reports as markdown: one file per role by stage, plus the complete one."""
    check_out_dir(out)
    store = store or default_store()
    from projections.backtest import is_backtest_id
    if is_backtest_id(run_id):  # scorecard, decisions and chart (cli/backtest.py)
        from cli.backtest import report_backtest
        report_backtest(run_id, store=store, address=address,
                        out=out or Path("reports") / run_id)
        return
    from projections.reports import render_reports
    from projections.run_state import project
    state = project(load_run(store, address, run_id))
    folder = out or Path("reports") / run_id
    files = render_reports(state)
    write_files(folder, files)
    typer.echo(f"wrote {len(files)} files to {folder}")


STATUSES = ("completed", "failed", "incomplete")


@command
def runs(limit: Annotated[int, typer.Option(help="Newest N runs (0: all).", min=0)] = 50,
         ticker: Annotated[Optional[str], typer.Option(help="Only this ticker.")] = None,
         status: Annotated[Optional[str], typer.Option(
             help="Only runs in this status: completed, failed or incomplete.")] = None,
         store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False) -> None:
    """List runs, newest first: status, ticker, date, rating, model usage."""
    store = store or default_store()
    from events.inputs import validate_ticker
    if status is not None and status not in STATUSES:
        fail(f"unknown status {status!r}; choose from {', '.join(STATUSES)}")
    params = {"ticker": validate_ticker(ticker) if ticker else None, "status": status,
              "limit": limit or 2**62}
    rows = _query(store, address, "runs", params)
    if as_json:
        typer.echo(json.dumps([_run_json(r) for r in rows], default=str, indent=2))
        return
    from rich.table import Table
    title = f"runs in {store}" + (f" (newest {limit})" if limit and len(rows) == limit else "")
    table = Table(title=title)
    table.add_column("run id", no_wrap=True)
    for col in ("ticker", "date", "status", "rating", "calls", "cost $", "updated"):
        table.add_column(col, justify="right" if col in ("calls", "cost $") else "left")
    for r in rows:
        table.add_row(r["run_id"], r["ticker"], str(r["trade_date"]), r["status"],
                      r["rating"] or "-", str(r["calls"]), f"{r['cost_usd']:.4f}",
                      r["updated_at"].strftime("%Y-%m-%d %H:%M:%S"))
    display.out().print(table)


def _run_json(row: dict) -> dict:
    from projections.views import run_summary
    summary = dataclasses.asdict(run_summary(row))
    return summary | {k: row[k] for k in ("quick_model", "deep_model", "forked_from", "calls",
                                          "failed", "input_tokens", "output_tokens",
                                          "cost_usd")}


def _query(store: Path, address: str | None, name: str, params: dict | None = None
           ) -> list[dict]:
    """One named read-model query, answered from the file or the cluster's store actor."""
    from cli.views import open_views
    views = open_views(store, address)
    try:  # a store written before read models existed builds them once: show it
        with _progress("building read models") as progress:
            return views.query(name, params, progress)
    finally:
        views.close()


@memory_command("show")
def memory_show(ticker: Annotated[Optional[str], typer.Option(help="Only this ticker.")] = None,
                store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False
                ) -> None:
    """Print the memory log: decisions, realised returns and alpha, reflections."""
    store = store or default_store()
    from events.inputs import validate_ticker
    from projections.memory import render_log
    from projections.views import entries_from_rows
    if ticker:
        rows = _query(store, address, "memory_of_ticker", {"ticker": validate_ticker(ticker)})
    else:
        rows = _query(store, address, "memory")
    entries = entries_from_rows(rows)
    if as_json:
        typer.echo(json.dumps([{
            "run_id": m.run_id, "ticker": m.ticker, "trade_date": str(m.trade_date),
            "rating": m.rating, "resolved": m.resolved,
            "raw_return": m.outcome.raw_return if m.outcome else None,
            "alpha": m.outcome.alpha if m.outcome else None,
            "holding_days": m.outcome.holding_days if m.outcome else None,
            "resolved_on": str(m.outcome.resolved_on) if m.outcome else None,
            "reflection": m.reflection} for m in entries], indent=2))
    else:
        typer.echo(render_log(entries) or "(the memory log is empty)")


@command
def stats(by: Annotated[str, typer.Option(help="Group by model, provider, role, day or run.")] = "model",
          store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False) -> None:
    """Model usage across runs: calls, failures, retries, tokens, cost, latency, and the share
    of the figures written that the grounding audit traced to the data."""
    from projections.views import STATS_GROUPS, usage_row
    if by not in STATS_GROUPS:
        fail(f"cannot group by {by!r}; choose from {', '.join(STATS_GROUPS)}")
    from projections.views import GroundingRate, grounding_rates
    store = store or default_store()
    rows = [usage_row(r) for r in _query(store, address, f"stats_by_{by}")]
    rates = grounding_rates(_query(store, address, f"grounding_by_{by}"))
    if as_json:
        typer.echo(json.dumps([dataclasses.asdict(r) | {"mean_latency_ms": r.mean_latency_ms}
                               | _grounding_json(rates.get(r.key)) for r in rows], indent=2))
        return
    from rich.table import Table
    table = Table(title=f"model usage by {by}")
    for col in (by, "calls", "failed", "attempts", "tokens in", "tokens out", "cost $", "mean ms",
                "figures", "grounded", "flagged"):
        table.add_column(col, justify="left" if col == by else "right")
    for r in rows:
        g = rates.get(r.key) or GroundingRate()
        table.add_row(r.key, str(r.calls), str(r.failed), str(r.attempts), f"{r.input_tokens:,}",
                      f"{r.output_tokens:,}", f"{r.cost_usd:.4f}", f"{r.mean_latency_ms:.0f}",
                      f"{g.figures:,}", "-" if g.rate is None else f"{g.rate:.1%}",
                      f"{g.ungrounded + g.look_ahead:,}")
    display.out().print(table)


def _grounding_json(rate: object) -> dict:
    """The grounding columns of a `stats --json` row (zeros where nothing was audited)."""
    from projections.views import GroundingRate
    g = rate if isinstance(rate, GroundingRate) else GroundingRate()
    return {"grounding": dataclasses.asdict(g) | {"rate": g.rate}}


@command
def rebuild(store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False
            ) -> None:
    """Recreate every read model (runs, memory log, usage) from the events.

    Read models are caches of the event log, kept up to date as events are appended; this
    drops them and replays the log (also done by itself when a view's definition changes)."""
    store = store or default_store()
    from cli.views import open_views
    views = open_views(store, address)
    try:
        with _progress("rebuilding read models") as progress:
            read, counts = views.rebuild(progress)
    finally:
        views.close()
    if as_json:
        typer.echo(json.dumps({"events": read, "rows": counts}))
        return
    typer.echo(f"rebuilt {len(counts)} tables from {read:,} events: "
               + ", ".join(f"{name.removeprefix('view_')} {n:,} rows"
                           for name, n in counts.items()))


@contextlib.contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr when it is a terminal; ``update(position, last)``."""
    if not display.err.is_terminal:
        yield None
        return
    from rich.progress import Progress
    with Progress(console=display.err, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(position: int, last: int) -> None:
            bar.update(task, completed=position, total=last)
        yield update


@command
def verify(store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False,
           incremental: Annotated[bool, typer.Option(
               "--incremental", help="Check only what was appended since the last verify "
               "(its checkpoint is signed; a full verify still checks everything).")] = False,
           anchor: Annotated[Optional[Path], typer.Option(
               "--anchor", help="After a clean verify, export the store's signed head to FILE "
               "(keep it elsewhere: it proves later what the store held).",
               metavar="FILE")] = None,
           against: Annotated[Optional[Path], typer.Option(
               "--against", help="Also check the store against a head exported with --anchor.",
               metavar="FILE")] = None) -> None:
    """Check the whole store: every stream's keyed hash chain, no event missing anywhere, every
    stored text body, and the signed head anchor (so the newest events cannot be cut off)."""
    from events.store import StoreError, anchor_json, load_anchor_text
    store = store or default_store()
    exported = None
    if against is not None:
        try:
            exported = load_anchor_text(against.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            fail(f"cannot read the anchor {against}: {getattr(exc, 'strerror', None) or exc}")
    if address:
        reader = open_reader(store, address)
    else:
        if not store.exists():
            fail(f"no event store at {store} (run something first, or pass --store)")
        reader = open_reader(store, None)  # read-only: bounded memory; checkpoint after
    try:
        if address:  # the store actor verifies (no progress bar across processes)
            report = reader.verify_all(incremental=incremental, against=exported)
        else:
            with _progress("verifying") as progress:
                report = reader.verify_all(progress=progress, incremental=incremental,
                                           against=exported)
        if anchor is not None and report.ok:
            head = reader.head_anchor()
            tmp = anchor.with_name(f".{anchor.name}.tmp")
            try:
                tmp.write_text(anchor_json(head))
                tmp.replace(anchor)
            except OSError as exc:
                fail(f"cannot write the anchor {anchor}: {exc.strerror or exc}")
    except StoreError as exc:
        fail(str(exc))
    finally:
        reader.close()
    if report.unrecorded_checkpoint is not None and not address:
        _record_checkpoint(store, report)
    if as_json:
        typer.echo(json.dumps(report.as_json() | {"anchor_exported": str(anchor) if anchor
                                                  and report.ok else None}, indent=2))
    else:
        from rich.text import Text
        for p in report.problems:  # one line each; stored text is never read as markup
            display.err.print(Text.assemble((p.stream, "red"), ": ", p.problem or ""),
                              soft_wrap=True)
        scope = f" after position {report.from_position}" if report.from_position else ""
        typer.echo(f"{report.streams} streams, {report.events} events{scope}: "
                   + ("intact" if report.ok else f"{len(report.problems)} problem(s)"))
        if anchor is not None and report.ok:
            typer.echo(f"signed head exported to {anchor}")
    if not report.ok:
        raise typer.Exit(1)


def _record_checkpoint(store: Path, report: Any) -> None:
    """The verify read the store read-only (DuckDB's buffers capped); its checkpoint goes in
    through a short writable open. A store busy or read-only for us keeps the old one."""
    from events.duckdb_store import DuckDBEventStore
    from events.store import StoreError
    try:
        writer = DuckDBEventStore(store)
    except StoreError:
        return
    try:
        writer.record_checkpoint(report.unrecorded_checkpoint, report)
    finally:
        writer.close()
