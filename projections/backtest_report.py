"""A backtest written up as markdown: the plan, the scorecard, and every decision. Pure."""
from __future__ import annotations

from events.backtest import TickerScore
from projections.backtest import BacktestState, DecisionOutcome


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2%}"


def share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def scorecard_markdown(scores: list[TickerScore]) -> list[str]:
    lines = ["| ticker | decisions | resolved | Hold rate | hit rate | policy | buy & hold | "
             "benchmark | ratings |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in scores:
        ratings = " ".join(f"{k} {v}" for k, v in sorted(s.ratings.items()))
        bench = f"{pct(s.benchmark_return)} ({s.benchmark})" if s.benchmark else "—"
        lines.append(f"| {s.ticker} | {s.decisions} | {s.resolved} | {share(s.hold_rate)} | "
                     f"{share(s.hit_rate)} | {pct(s.policy_return)} | {pct(s.buy_hold_return)} "
                     f"| {bench} | {ratings} |")
    overall = next((s for s in scores if s.ticker == "ALL"), None)
    if overall:
        lines += ["", "By rating (all tickers):", "",
                  "| rating | decisions | resolved | hit rate | mean alpha |",
                  "|---|---:|---:|---:|---:|"]
        lines += [f"| {r.rating.value} | {r.decisions} | {r.resolved} | {share(r.hit_rate)} | "
                  f"{pct(r.mean_alpha)} |" for r in overall.by_rating]
    return lines


def render_backtest(state: BacktestState, decisions: list[DecisionOutcome],
                    scores: list[TickerScore], chart: str | None, *, completed: bool) -> str:
    request = state.request
    assert request is not None
    tickers = " ".join(c.ticker for c in request.configs)
    c0 = request.configs[0]
    status = "completed" if completed else (
        f"incomplete: {len(state.started)} of {len(state.plan)} runs started")
    lines = [f"# Backtest {state.backtest_id}", "",
             f"- tickers: {tickers}", f"- dates: {len(request.dates)} from {request.dates[0]} "
             f"to {request.dates[-1]}", f"- models: {c0.quick_model}, {c0.deep_model}",
             f"- holding period: {c0.holding_days} trading days; benchmark "
             f"{c0.benchmark or 'by exchange (SPY for US)'}",
             f"- policy: Buy/Overweight long, Hold flat, Underweight/Sell {request.bearish}; "
             "each position held over its decision's holding period, compounded",
             f"- status: {status}", "", "## Scorecard", ""]
    lines += scorecard_markdown(scores) if scores else ["(nothing resolved yet)"]
    if chart:
        lines += ["", f"![equity curves and ratings]({chart})"]
    lines += ["", "## Decisions", "",
              "| date | ticker | rating | status | return | alpha | benchmark | days | run |",
              "|---|---|---|---|---:|---:|---|---:|---|"]
    lines += [f"| {x.trade_date} | {x.ticker} | {x.rating or '—'} | {x.status} | "
              f"{pct(x.raw_return)} | {pct(x.alpha)} | {x.benchmark or '—'} | "
              f"{x.holding_days if x.holding_days is not None else '—'} | `{x.run_id}` |"
              for x in decisions]
    return "\n".join(lines) + "\n"
