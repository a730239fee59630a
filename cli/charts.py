"""The backtest chart: equity curves of the rating-following policy against buy-and-hold and
the benchmark, and each ticker's price with its ratings marked. matplotlib is imported here
only, lazily, with the headless Agg backend (no display needed, nothing opened on screen)."""
from __future__ import annotations

from pathlib import Path

from events.backtest import Bearish
from projections.backtest import DecisionOutcome, combined_curve, equity_curve

#: Marker and colour per rating on the price panels.
RATING_STYLE = {"Buy": ("^", "#1a7f37"), "Overweight": ("^", "#8ccf7e"), "Hold": ("o", "#8c8c8c"),
                "Underweight": ("v", "#f0a04b"), "Sell": ("v", "#cf222e")}
MAX_PRICE_PANELS = 6


def render_chart(path: Path, decisions: list[DecisionOutcome], *, bearish: Bearish,
                 title: str) -> Path:
    """Write the PNG to ``path`` (small: 100 dpi) and return it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tickers = list(dict.fromkeys(x.ticker for x in decisions))
    shown = tickers[:MAX_PRICE_PANELS]
    fig, axes = plt.subplots(1 + len(shown), 1, figsize=(9, 3 + 2 * len(shown)),
                             squeeze=False, sharex=True, gridspec_kw={"height_ratios": [3] + [2] * len(shown)})
    top = axes[0][0]
    curves = {t: equity_curve([x for x in decisions if x.ticker == t], bearish) for t in tickers}
    overall = combined_curve(list(curves.values()))
    if overall:
        days = [p.day for p in overall]
        top.plot(days, [p.policy for p in overall], label="policy following the ratings",
                 color="#0969da", linewidth=2)
        top.plot(days, [p.buy_hold for p in overall], label="buy and hold", color="#6e7781",
                 linestyle="--")
        top.plot(days, [p.benchmark for p in overall], label="benchmark", color="#000000",
                 linestyle=":")
        top.legend(loc="best", fontsize=8)
    else:
        top.text(0.5, 0.5, "no resolved decisions yet", ha="center", transform=top.transAxes)
    top.set_title(title + (f" ({len(tickers)} tickers, equal weight)" if len(tickers) > 1
                           else ""), fontsize=10)
    top.set_ylabel("equity (start = 1)")
    top.grid(alpha=0.3)
    for ax, ticker in zip((row[0] for row in axes[1:]), shown):
        mine = [x for x in decisions if x.ticker == ticker and x.close is not None]
        ax.plot([x.trade_date for x in mine], [x.close for x in mine], color="#57606a",
                linewidth=1)
        for rating, (marker, colour) in RATING_STYLE.items():
            points = [x for x in mine if x.rating == rating]
            if points:
                ax.scatter([x.trade_date for x in points], [x.close for x in points],
                           marker=marker, color=colour, s=40, zorder=3, label=rating)
        ax.set_ylabel(f"{ticker} close")
        ax.legend(loc="best", fontsize=7, ncol=5)
        ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
