"""Commands that start the team: run (one date or a backtest), resume, memory resolve."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli import display
from cli.common import AddressOpt, JsonOpt, StoreOpt, command, fail, memory_command
from cli.options import (ENV, build_configs, default_store, new_run_id, read_tickers_file,
                         trade_dates)
from cli.stores import load_run
from events.config import InvalidInput
from events.store import StoreError


@command
def run(
    tickers: Annotated[Optional[list[str]], typer.Argument(help="One or more tickers, e.g. NVDA AAPL 7203.T")] = None,
    date: Annotated[str, typer.Option("--date", "-d", help="Trade date YYYY-MM-DD (not future).")] = "",
    tickers_file: Annotated[Optional[Path], typer.Option(help="File of tickers, one per line (# comments).")] = None,
    to: Annotated[Optional[str], typer.Option("--to", help="Backtest: last trade date; runs every --every weekdays from --date, then scores the decisions.")] = None,
    every: Annotated[int, typer.Option(help="Backtest: weekdays between trade dates.")] = 5,
    analysts: Annotated[str, typer.Option(help="Comma list of analysts.")] = "market,social,news,fundamentals",
    debate_rounds: Annotated[int, typer.Option(help="Bull/bear rounds (1-10).")] = 1,
    risk_rounds: Annotated[int, typer.Option(help="Risk debate rounds (1-10).")] = 1,
    offline: Annotated[bool, typer.Option("--offline", help="Offline model and synthetic data (unless --data-dir/--vendor).")] = False,
    quick_model: Annotated[Optional[str], typer.Option(help="provider/model for analysts, debaters, trader.")] = None,
    deep_model: Annotated[Optional[str], typer.Option(help="provider/model for the two managers.")] = None,
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible or local endpoint.")] = None,
    vendor: Annotated[Optional[str], typer.Option(help="Data vendor for every category: yfinance, alpha_vantage, local, synthetic.")] = None,
    data_dir: Annotated[Optional[str], typer.Option(help="Folder of SYMBOL.csv files (local vendor).")] = None,
    vendors: Annotated[Optional[str], typer.Option(help="Fallback chains per category, e.g. 'prices=yfinance,local;news=local' (wins over --vendor).")] = None,
    max_tool_calls: Annotated[Optional[int], typer.Option(help="Tool-call cap per analyst.")] = None,
    token_budget: Annotated[Optional[int], typer.Option(help="Stop a run past this many tokens.")] = None,
    cost_budget: Annotated[Optional[float], typer.Option(help="Stop a run past this cost (USD).")] = None,
    language: Annotated[Optional[str], typer.Option(help="Report language (ratings stay English).")] = None,
    benchmark: Annotated[Optional[str], typer.Option(help="Benchmark for alpha (default: SPY, or by exchange suffix).")] = None,
    holding_days: Annotated[Optional[int], typer.Option(help="Trading days a decision is scored over (default 5).")] = None,
    latency: Annotated[Optional[float], typer.Option(help="Offline model: simulated seconds per call.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Reports folder (default: beside the store).")] = None,
    store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False,
) -> None:
    """Research TICKERS on --date with the whole team, in parallel; print the ratings.

    With --to it is a backtest: the dates run one after another (tickers in parallel), so
    each decision can learn from the resolved outcomes of earlier ones; then every decision
    is scored against the market and a scorecard is printed."""
    store = store or default_store()
    if not date:
        raise InvalidInput("give the trade date with --date YYYY-MM-DD")
    tickers = list(tickers or []) + (read_tickers_file(tickers_file) if tickers_file else [])
    days = [date] if to is None else [str(day) for day in trade_dates(date, to, every)]
    batches = [build_configs(tickers, day, analysts, debate_rounds, risk_rounds, offline,
                             quick_model, deep_model, base_url, vendor, data_dir,
                             vendors=vendors, max_tool_calls=max_tool_calls,
                             token_budget=token_budget, cost_budget_usd=cost_budget,
                             output_language=language or os.environ.get(ENV["language"]),
                             benchmark=benchmark, holding_days=holding_days,
                             offline_latency_s=latency) for day in days]
    _check_keys(batches[0][0])
    from events import domain as d
    from events.envelope import NewEvent
    requests = []
    for configs in batches:
        ids = [new_run_id(config) for config in configs]
        requests.append([(rid, [NewEvent(d.RunRequested(run_id=rid, config=c), "cli")])
                         for rid, c in zip(ids, configs)])
    rows, scores = _drive(store, address, requests, out, as_json, score=to is not None)
    _finish(rows, as_json, scores)


@command
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    token_budget: Annotated[Optional[int], typer.Option(help="A new token budget.")] = None,
    cost_budget: Annotated[Optional[float], typer.Option(help="A new cost budget (USD).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Reports folder.")] = None,
    store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False,
) -> None:
    """Continue an interrupted or failed run from its last event, with its own configuration."""
    store = store or default_store()
    from events import domain as d
    from events.envelope import NewEvent
    from projections.run_state import project
    state = project(load_run(store, address, run_id))
    if state.status == "completed":
        display.err.print(f"{run_id} already completed with rating {state.rating}")
        _finish([_row(run_id, state, _reports_dir(store, out, run_id))], as_json)
        return
    _check_keys(state.config)
    resumed = d.RunResumed(reason="resume requested", token_budget=token_budget,
                           cost_budget_usd=cost_budget)
    rows, _ = _drive(store, address, [[(run_id, [NewEvent(resumed, "cli")])]], out, as_json)
    _finish(rows, as_json)


@command
def fork(
    run_id: Annotated[str, typer.Argument(help="The run to fork.")],
    at: Annotated[str, typer.Option(help="Stage to continue from: debate, research_manager, trader, risk, portfolio_manager.")] = "debate",
    quick_model: Annotated[Optional[str], typer.Option(help="New quick model.")] = None,
    deep_model: Annotated[Optional[str], typer.Option(help="New deep model.")] = None,
    base_url: Annotated[Optional[str], typer.Option(help="New endpoint.")] = None,
    debate_rounds: Annotated[Optional[int], typer.Option(help="New bull/bear rounds.")] = None,
    risk_rounds: Annotated[Optional[int], typer.Option(help="New risk rounds.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Reports folder.")] = None,
    store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False,
) -> None:
    """Re-decide a run from a stage with other models or rounds, on the same earlier work
    (e.g. the same analyst reports): a new run whose first events are copies."""
    from pydantic import ValidationError

    from events import domain as d
    from events.envelope import NewEvent
    from projections.fork import STAGES, fork_payloads
    store = store or default_store()
    if at not in STAGES:
        raise InvalidInput(f"unknown stage {at!r}; choose from {', '.join(STAGES)}")
    source = load_run(store, address, run_id)
    changes = {k: v for k, v in (("quick_model", quick_model), ("deep_model", deep_model),
                                 ("base_url", base_url), ("debate_rounds", debate_rounds),
                                 ("risk_rounds", risk_rounds)) if v is not None}
    try:
        config = type(source[0].payload.config).model_validate(
            source[0].payload.config.model_dump() | changes)
    except ValidationError as exc:
        raise InvalidInput(f"invalid setting: {exc.errors()[0]['msg']}") from None
    _check_keys(config)
    new_id = new_run_id(config)
    first = d.RunRequested(run_id=new_id, config=config, forked_from=run_id, forked_at=at)
    events = [NewEvent(first, "cli")] + [NewEvent(p, "fork", None)
                                         for p in fork_payloads(source, at)]
    rows, _ = _drive(store, address, [[(new_id, events)]], out, as_json)
    _finish(rows, as_json)


def _check_keys(config: Any) -> None:
    if config.is_offline:
        return
    from providers.keys import check_keys
    try:
        for warning in check_keys([config.quick_model, config.deep_model], config.base_url):
            display.err.print(f"[yellow]warning:[/] {warning}")
    except Exception as exc:  # MissingKeyError: names the variable
        fail(str(exc).splitlines()[0])


def _drive(store: Path, address: str | None, batches: list[list], out: Path | None,
           as_json: bool, score: bool = False) -> tuple[list[dict], list]:
    """Run each batch of requests (runs in a batch in parallel, batches in order); with
    ``score``, resolve every outcome afterwards and return the batches' scorecard."""
    import ray
    started = time.monotonic()
    rows: list[dict] = []
    with _team(store, address) as team:
        for requests in batches:
            rows += _drive_batch(team, store, requests, out, as_json, started)
        if not score:
            return rows, []
        from projections.memory import MEMORY_TYPES, memory_entries
        from projections.scorecard import scorecard
        config = ray.get(team.store.read_stream.remote(rows[0]["run_id"]))[0].payload.config
        ray.get(team.coordinator.resolve_outcomes.remote(team.store, config))
        entries = memory_entries(ray.get(team.store.read_all.remote(0, None,
                                                                    list(MEMORY_TYPES))))
        return rows, scorecard(entries, {r["run_id"] for r in rows})


def _drive_batch(team: Any, store: Path, requests: list, out: Path | None, as_json: bool,
                 started: float) -> list[dict]:
    import ray

    from projections.reports import render_reports
    from projections.run_state import project
    for run_id, events in requests:
        key = f"request:{run_id}" if events[0].payload.type == "RunRequested" else None
        ray.get(team.store.append.remote(run_id, events, None, key))
    refs = {run_id: team.coordinator.drive.remote(team.store, run_id) for run_id, _ in requests}
    try:
        _follow(team.store, list(refs), refs, started, quiet=as_json)
    except KeyboardInterrupt:
        display.err.print(f"interrupted; the events so far are kept. Continue with: "
                          f"ta-actors resume RUN_ID --store {store}  (runs: {' '.join(refs)})")
        raise typer.Exit(130) from None
    rows = []
    for run_id in refs:
        ray.get(refs[run_id])
        state = project(ray.get(team.store.read_stream.remote(run_id)))
        folder = _reports_dir(store, out, run_id)
        write_files(folder, render_reports(state))
        rows.append(_row(run_id, state, folder))
    return rows


@contextlib.contextmanager
def _team(store: Path, address: str | None):
    """The actors, bound to ``store``; the store file is released again on the way out."""
    import ray

    from actors import runtime
    owned = runtime.start(address)
    team = runtime.team(store)
    try:
        problem = ray.get(team.store.open.remote())
        if problem:
            raise StoreError(problem)
        yield team
    finally:
        if not address:  # on a cluster the store actor stays up for other commands
            runtime.release_store(team.store)
        if owned:
            ray.shutdown()


def _follow(store: Any, run_ids: list[str], refs: dict, started: float, quiet: bool) -> dict:
    """Live progress from the store itself until every drive has returned."""
    import ray
    from rich.live import Live

    from projections.run_state import project
    pending = list(refs.values())
    if quiet:  # nothing to show: just wait
        ray.get(pending)
        return {}
    streams = {rid: ray.get(store.read_stream.remote(rid)) for rid in run_ids}
    states = {rid: project(events) for rid, events in streams.items()}
    position = max((events[-1].position for events in streams.values() if events), default=0)
    live = None if quiet or not display.err.is_terminal else Live(
        display.progress_table(states, started), console=display.err, refresh_per_second=4,
        redirect_stdout=False)  # stdout stays ours: Ray notices are filtered there
    if live:
        live.start()
    try:
        while True:
            done, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
            for e in ray.get(store.read_all.remote(position)):
                position = e.position
                if e.stream in states:
                    before = states[e.stream]
                    states[e.stream] = project([e], before)
                    if not quiet and not live:
                        _log_line(e, states[e.stream], started)
            if live:
                live.update(display.progress_table(states, started))
            if not pending:
                return states
    finally:
        if live:
            live.stop()


def _log_line(e: Any, state: Any, started: float) -> None:
    if e.type in ("AnalystReportSubmitted", "DebateArgumentMade", "InvestmentPlanIssued",
                  "TradeProposed", "RiskArgumentMade", "PortfolioDecisionIssued", "RunCompleted",
                  "RunFailed"):
        from projections.timeline import SUMMARIES
        display.err.print(f"[{time.monotonic() - started:6.1f}s] {state.ticker:<8} "
                          f"{e.type:<24} {SUMMARIES[e.type](e.payload)}", soft_wrap=True)


def _reports_dir(store: Path, out: Path | None, run_id: str) -> Path:
    return (out or Path(store).expanduser().parent / "reports") / run_id


def write_files(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _row(run_id: str, state: Any, folder: Path) -> dict:
    return {"ticker": state.ticker, "trade_date": str(state.config.trade_date), "run_id": run_id,
            "status": state.status, "rating": state.rating,
            "reason": state.failure.reason if state.failure else None,
            "reports": str(folder / "complete_report.md") if state.decision else None,
            "llm_calls": state.usage.llm_calls, "tool_calls": state.usage.tool_calls,
            "tokens": state.usage.tokens, "cost_usd": round(state.usage.cost_usd, 6)}


def _finish(rows: list[dict], as_json: bool, scores: list | None = None) -> None:
    if as_json:
        document: Any = rows if not scores else {
            "runs": rows, "scorecard": [dataclasses.asdict(s) for s in scores]}
        typer.echo(json.dumps(document, indent=2))
    else:
        display.out().print(display.final_table(rows))
        if scores:
            display.out().print(display.scorecard_table(scores))
    if any(r["status"] != "completed" for r in rows):
        raise typer.Exit(1)


@memory_command("resolve")
def memory_resolve(
    offline: Annotated[bool, typer.Option("--offline", help="Offline reflector, synthetic data.")] = False,
    quick_model: Annotated[Optional[str], typer.Option(help="Model for the reflector.")] = None,
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible endpoint.")] = None,
    vendor: Annotated[Optional[str], typer.Option(help="Price vendor.")] = None,
    data_dir: Annotated[Optional[str], typer.Option(help="Folder of SYMBOL.csv files.")] = None,
    holding_days: Annotated[int, typer.Option(help="Trading days to score over.")] = 5,
    store: StoreOpt = None, address: AddressOpt = None,
) -> None:
    """Score every pending decision whose holding period has passed, and reflect on it."""
    try:
        config = build_configs(["SPY"], str(__import__("datetime").date.today()),
                               "market", 1, 1, offline, quick_model, None, base_url, vendor,
                               data_dir, holding_days=holding_days)[0]
    except InvalidInput as exc:
        fail(str(exc))
    _check_keys(config)
    import ray
    try:
        with _team(store or default_store(), address) as team:
            count = ray.get(team.coordinator.resolve_outcomes.remote(team.store, config))
    except StoreError as exc:
        fail(str(exc).splitlines()[0])
    typer.echo(f"resolved {count} pending decision(s)")
