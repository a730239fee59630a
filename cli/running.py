"""Commands that start the team: run (one date or a backtest), resume, memory resolve."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli import display
from cli.common import (AddressOpt, JsonOpt, StoreOpt, check_out_dir, command, default_store, fail,
                        memory_command)
from events.errors import InvalidInput, StoreError, one_line


#: The local-model options run, resume and fork share (RunConfig fields, cli.options.LLM_OPTIONS).
LLMConcurrencyOpt = Annotated[Optional[int], typer.Option(help="Model calls in flight per endpoint (default: the server's slots, else 1 for a local server).")]
LLMIdleTimeoutOpt = Annotated[Optional[float], typer.Option(help="Seconds without a streamed token before a call try fails (default: 120).")]
LLMTimeoutOpt = Annotated[Optional[float], typer.Option(help="Overall cap in seconds on one call try (default: 1800 local, 600 hosted).")]
ContextWindowOpt = Annotated[Optional[int], typer.Option(help="Context window in tokens (default: the server's, else the capability table).")]
WorkersOpt = Annotated[Optional[int], typer.Option(
    "--workers", min=1, help="Worker and market-data replicas (default: one each per node).")]


@command
def run(
    tickers: Annotated[Optional[list[str]], typer.Argument(help="One or more tickers, e.g. NVDA AAPL 7203.T")] = None,
    date: Annotated[str, typer.Option("--date", "-d", help="Trade date YYYY-MM-DD (not future).")] = "",
    tickers_file: Annotated[Optional[Path], typer.Option(help="File of tickers, one per line (# comments).")] = None,
    to: Annotated[Optional[str], typer.Option("--to", help="Backtest: last trade date; runs every --every weekdays from --date, then scores the decisions.")] = None,
    every: Annotated[int, typer.Option(help="Backtest: weekdays between trade dates.")] = 5,
    bearish: Annotated[str, typer.Option(help="Backtest policy on Underweight/Sell: short or flat.")] = "short",
    max_runs: Annotated[Optional[int], typer.Option(help="Backtest: start at most N runs now; `resume BACKTEST_ID` does the rest.", min=1)] = None,
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
    max_stale_days: Annotated[Optional[int], typer.Option(help="Most trading days the snapshot's last bar may lie before --date (default: env TA_ACTORS_MAX_STALE_DAYS, else 5).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Reports folder (default: beside the store).")] = None,
    max_tickers: Annotated[Optional[int], typer.Option(help="Most tickers per command (default: env TA_ACTORS_MAX_TICKERS, else 500).")] = None,
    llm_concurrency: LLMConcurrencyOpt = None, llm_idle_timeout: LLMIdleTimeoutOpt = None,
    llm_timeout: LLMTimeoutOpt = None, context_window: ContextWindowOpt = None,
    workers: WorkersOpt = None,
    store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False,
) -> None:
    """Research TICKERS on --date with the whole team, in parallel; print the ratings.

    With --to it is a backtest: the dates run one after another (tickers in parallel), so
    each decision can learn from the resolved outcomes of earlier ones; then every decision
    is scored against the market and a scorecard is printed."""
    # late: only the commands that build a RunConfig load pydantic (`runs` starts faster)
    from cli.options import build_configs, new_run_id, read_tickers_file, trade_dates
    store = store or default_store()
    if not date:
        raise InvalidInput("give the trade date with --date YYYY-MM-DD")
    check_out_dir(out)
    if to is None and (max_runs is not None or every != 5 or bearish != "short"):
        raise InvalidInput("--max-runs, --every and --bearish are backtest options: "
                           "give the last trade date with --to as well")
    tickers = list(tickers or []) + (read_tickers_file(tickers_file) if tickers_file else [])
    days = [date] if to is None else [str(day) for day in trade_dates(date, to, every)]
    batches = [build_configs(tickers, day, analysts, debate_rounds, risk_rounds, offline,
                             quick_model, deep_model, base_url, vendor, data_dir,
                             vendors=vendors, max_tickers=max_tickers,
                             max_tool_calls=max_tool_calls,
                             llm_concurrency=llm_concurrency,
                             llm_idle_timeout_s=llm_idle_timeout, llm_timeout_s=llm_timeout,
                             context_window=context_window,
                             token_budget=token_budget, cost_budget_usd=cost_budget,
                             output_language=language,
                             benchmark=benchmark, holding_days=holding_days,
                             offline_latency_s=latency,
                             max_stale_days=max_stale_days) for day in days]
    _check_keys(batches[0][0])
    if to is not None:
        from cli.backtest import check_bearish, start_backtest
        start_backtest(store=store, address=address, configs=batches[0],
                       dates=[c[0].trade_date for c in batches], bearish=check_bearish(bearish),
                       max_runs=max_runs, out=out, as_json=as_json, workers=workers)
        return
    from events import domain as d
    from events.envelope import NewEvent
    requests = []
    for configs in batches:
        ids = [new_run_id(config) for config in configs]
        requests.append([(rid, [NewEvent(d.RunRequested(run_id=rid, config=c), "cli")])
                         for rid, c in zip(ids, configs)])
    rows, _ = _drive(store, address, requests, out, as_json, workers=workers)
    _finish(rows, as_json)


@command
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    token_budget: Annotated[Optional[int], typer.Option(help="A new token budget.")] = None,
    cost_budget: Annotated[Optional[float], typer.Option(help="A new cost budget (USD).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Reports folder.")] = None,
    follow: Annotated[bool, typer.Option(help="If a live driver owns the run, follow it to its end (else stop at once).")] = True,
    llm_concurrency: LLMConcurrencyOpt = None, llm_idle_timeout: LLMIdleTimeoutOpt = None,
    llm_timeout: LLMTimeoutOpt = None, context_window: ContextWindowOpt = None,
    store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False,
) -> None:
    """Continue an interrupted or failed run from its last event, with its own configuration
    (new budgets and local-model settings, if given, are recorded and apply from here on)."""
    from cli.options import check_budgets, check_llm_settings
    check_budgets(token_budget, cost_budget)
    settings = check_llm_settings(llm_concurrency=llm_concurrency,
                                  llm_idle_timeout_s=llm_idle_timeout,
                                  llm_timeout_s=llm_timeout, context_window=context_window)
    check_out_dir(out)
    store = store or default_store()
    from projections.backtest import is_backtest_id
    if is_backtest_id(run_id):  # a backtest: finish its runs (cli/backtest.py)
        if token_budget is not None or cost_budget is not None or settings:
            raise InvalidInput("a backtest's runs keep the settings it was started with: "
                               "resume it without budget or model options")
        from cli.backtest import resume_backtest
        resume_backtest(run_id, store=store, address=address, out=out, as_json=as_json)
        return
    from events import domain as d
    from projections.run_state import project
    state = project(_verified(store, address, run_id))
    if state.status == "completed":
        display.err.print(f"{run_id} already completed with rating {state.rating}")
        _finish([_row(run_id, state, _reports_dir(store, out, run_id))], as_json)
        return
    _check_keys(state.config)
    resumed = d.RunResumed(reason="resume requested", token_budget=token_budget,
                           cost_budget_usd=cost_budget, settings=settings)
    rows, _ = _drive(store, address, [[(run_id, [])]], out, as_json, resume=resumed,
                     follow=follow)
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
    token_budget: Annotated[Optional[int], typer.Option(help="A new token budget.")] = None,
    cost_budget: Annotated[Optional[float], typer.Option(help="A new cost budget (USD).")] = None,
    llm_concurrency: LLMConcurrencyOpt = None, llm_idle_timeout: LLMIdleTimeoutOpt = None,
    llm_timeout: LLMTimeoutOpt = None, context_window: ContextWindowOpt = None,
    out: Annotated[Optional[Path], typer.Option(help="Reports folder.")] = None,
    store: StoreOpt = None, address: AddressOpt = None, as_json: JsonOpt = False,
) -> None:
    """Re-decide a run from a stage with other models or rounds, on the same earlier work
    (e.g. the same analyst reports): a new run whose first events are copies."""
    from cli.options import config_error, new_run_id
    from pydantic import ValidationError

    from events import domain as d
    from events.envelope import NewEvent
    from projections.fork import STAGES, fork_payloads
    store = store or default_store()
    check_out_dir(out)
    if at not in STAGES:
        raise InvalidInput(f"unknown stage {at!r}; choose from {', '.join(STAGES)}")
    source = _verified(store, address, run_id)
    changes = {k: v for k, v in (("quick_model", quick_model), ("deep_model", deep_model),
                                 ("base_url", base_url), ("debate_rounds", debate_rounds),
                                 ("risk_rounds", risk_rounds),
                                 ("token_budget", token_budget),
                                 ("cost_budget_usd", cost_budget),
                                 ("llm_concurrency", llm_concurrency),
                                 ("llm_idle_timeout_s", llm_idle_timeout),
                                 ("llm_timeout_s", llm_timeout),
                                 ("context_window", context_window)) if v is not None}
    try:
        config = type(source[0].payload.config).model_validate(
            source[0].payload.config.model_dump() | changes)
    except ValidationError as exc:
        raise config_error(exc) from None
    _check_keys(config)
    new_id = new_run_id(config)
    first = d.RunRequested(run_id=new_id, config=config, forked_from=run_id, forked_at=at)
    events = [NewEvent(first, "cli")] + [NewEvent(p, "fork", None)
                                         for p in fork_payloads(source, at)]
    rows, _ = _drive(store, address, [[(new_id, events)]], out, as_json)
    _finish(rows, as_json)


def _verified(store: Path, address: str | None, run_id: str) -> list:
    from cli.stores import BrokenHistory, load_verified_run
    try:
        return load_verified_run(store, address, run_id)
    except BrokenHistory as exc:
        fail(str(exc), code=1)


def _check_keys(config: Any) -> None:
    if config.is_offline:
        return
    from rich.markup import escape

    from providers.credentials import MissingKeyError, check_keys
    try:
        for warning in check_keys([config.quick_model, config.deep_model], config.base_url):
            display.err.print(f"[yellow]warning:[/] {escape(warning)}")
    except MissingKeyError as exc:  # names the variable
        fail(one_line(exc))


def _drive(store: Path, address: str | None, batches: list[list], out: Path | None,
           as_json: bool, resume: Any = None, follow: bool = True,
           workers: int | None = None) -> tuple[list[dict], list]:
    """Run each batch of requests (runs in a batch in parallel, batches in order)."""
    from actors.session import Session
    started = time.monotonic()
    rows: list[dict] = []
    with Session(store, address, workers) as session:
        for i, requests in enumerate(batches):
            if i:
                session.grow()  # nodes that joined since the last batch get replicas
            rows += _drive_batch(session, store, requests, out, as_json, started, resume,
                                 follow)
    return rows, []


def _drive_batch(session: Any, store: Path, requests: list, out: Path | None, as_json: bool,
                 started: float, resume: Any = None, follow: bool = True) -> list[dict]:
    from projections.reports import render_reports
    from projections.run_state import project
    session.append_many([(run_id, events, f"request:{run_id}")
                         for run_id, events in requests if events])
    run_ids = [run_id for run_id, _ in requests]
    if resume is not None and follow:
        _say_who_drives(session, run_ids[0])
    progress = _Progress(session, run_ids, started, quiet=as_json)
    try:
        with progress:
            summaries = session.drive(run_ids, resume=resume, follow=follow,
                                      on_tick=progress.tick)
    except KeyboardInterrupt:
        display.err.print(f"interrupted; the events so far are kept. Continue with: "
                          f"ta-actors resume RUN_ID --store {store}  (runs: {' '.join(run_ids)})",
                          markup=False)
        raise typer.Exit(130) from None
    rows = []
    for run_id in run_ids:
        folder = _reports_dir(store, out, run_id)
        summary = summaries.get(run_id, {})
        if "reports" in summary:  # a finished run: its driver sent figures and reports
            write_files(folder, summary["reports"])
            row = _summary_row(summary, folder)
        else:  # not finished here (busy elsewhere, or lost): what its events say so far
            state = project(session.read_stream(run_id))
            write_files(folder, render_reports(state))
            row = _row(run_id, state, folder)
        if summary.get("status") == "busy":  # --no-follow: someone else drives it
            display.err.print(f"run {run_id} is being driven by {summary.get('driver')}; not "
                              "touching it (--no-follow)", markup=False, emoji=False,
                              soft_wrap=True)
        if summary.get("status") in ("busy", "incomplete"):
            row |= {"status": summary["status"], "reason": summary.get("reason")}
        rows.append(row)
    return rows


def _say_who_drives(session: Any, run_id: str) -> None:
    """A resume of a run that a live driver owns follows it, and says so first."""
    from projections.run_state import project
    state = project(session.read_stream(run_id))
    if state.driver and not state.finished and session.owner_alive(state.driver, run_id):
        display.err.print(f"run {run_id} is being driven by {state.driver}; following it to "
                          "its end", markup=False, emoji=False, soft_wrap=True)


class _Progress:
    """Live progress from the store itself: a table on a terminal, one line per turn
    output otherwise, nothing with --json."""

    def __init__(self, session: Any, run_ids: list[str], started: float, quiet: bool):
        from projections.run_state import project
        self.session, self.started, self.quiet = session, started, quiet
        self.live: Any = None
        self.states: dict[str, Any] = {}
        self.position = 0
        if quiet:
            return
        for rid in run_ids:
            events = session.read_stream(rid)
            self.states[rid] = project(events)
            self.position = max([self.position] + [e.position for e in events[-1:]])

    def __enter__(self) -> _Progress:
        if not self.quiet and display.err.is_terminal:
            from rich.live import Live
            self.live = Live(display.progress_table(self.states, self.started),
                             console=display.err, refresh_per_second=4,
                             redirect_stdout=False)  # stdout stays ours
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.quiet:
            self.tick()
        if self.live:
            self.live.stop()

    def tick(self) -> None:
        if self.quiet:
            return
        from projections.run_state import project
        for e in self.session.read_all(self.position):
            self.position = e.position
            if e.stream in self.states:
                self.states[e.stream] = project([e], self.states[e.stream])
                if not self.live:
                    _log_line(e, self.states[e.stream], self.started)
        if self.live:
            streams = self.session.llm_streams() if self._streaming() else None
            self.live.update(display.progress_table(self.states, self.started, streams))

    def _streaming(self) -> bool:
        """Whether any run uses a real model (the offline model does not stream)."""
        return any(s.config is not None and not (
            s.config.quick_model.startswith("offline/")
            and s.config.deep_model.startswith("offline/")) for s in self.states.values())


def _log_line(e: Any, state: Any, started: float) -> None:
    if e.type in ("AnalystReportSubmitted", "DebateArgumentMade", "InvestmentPlanIssued",
                  "TradeProposed", "RiskArgumentMade", "PortfolioDecisionIssued", "RunCompleted",
                  "RunFailed"):
        from projections.timeline import SUMMARIES
        display.err.print(f"[{time.monotonic() - started:6.1f}s] {state.ticker:<8} "
                          f"{e.type:<24} {SUMMARIES[e.type](e.payload)}", soft_wrap=True,
                          markup=False)


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


def _summary_row(s: dict, folder: Path) -> dict:
    """The same row as ``_row``, from a finished run's summary."""
    return {"ticker": s["ticker"], "trade_date": s["trade_date"], "run_id": s["run_id"],
            "status": s["status"], "rating": s["rating"], "reason": s["reason"],
            "reports": str(folder / "complete_report.md") if s["decided"] else None,
            "llm_calls": s["llm_calls"], "tool_calls": s["tool_calls"], "tokens": s["tokens"],
            "cost_usd": s["cost_usd"]}


def _finish(rows: list[dict], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        display.out().print(display.final_table(rows))
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
    from cli.options import build_configs
    try:
        config = build_configs(["SPY"], str(__import__("datetime").date.today()),
                               "market", 1, 1, offline, quick_model, None, base_url, vendor,
                               data_dir, holding_days=holding_days)[0]
    except InvalidInput as exc:
        fail(str(exc))
    _check_keys(config)
    from actors.session import Session
    try:
        with Session(store or default_store(), address) as session:
            count = session.resolve_outcomes(config)
    except StoreError as exc:
        fail(one_line(exc))
    typer.echo(f"resolved {count} pending decision(s)")
