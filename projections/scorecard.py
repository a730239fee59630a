"""How good were the decisions? Per ticker and overall: the rating-following policy against
buy-and-hold and the benchmark, hit rate and mean alpha by rating, and the Hold rate."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from events.backtest import DEFAULT_BEARISH, Bearish, RatingScore, TickerScore
from events.rating import RATING_SCORE, Rating, call_was_right
from projections.backtest import CurvePoint, DecisionOutcome, combined_curve, equity_curve

ALL = "ALL"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rating_score(rating: Rating, rows: list[DecisionOutcome]) -> RatingScore:
    mine = [x for x in rows if x.rating == rating.value]
    alphas = [x.alpha for x in mine if x.alpha is not None]
    return RatingScore(rating=rating, decisions=len(mine), resolved=len(alphas),
                       hit_rate=_mean([float(call_was_right(rating, a)) for a in alphas]),
                       mean_alpha=_mean(alphas))


def _score(ticker: str, rows: list[DecisionOutcome], curve: list[CurvePoint],
           bearish: Bearish) -> TickerScore:
    decided = [x for x in rows if x.rating]
    done = [(Rating(x.rating), x.alpha, x.raw_return) for x in decided
            if x.rating and x.alpha is not None and x.raw_return is not None]
    directional = [float(call_was_right(r, a)) for r, a, _ in done if RATING_SCORE[r] != 0]
    benchmarks = sorted({x.benchmark for x in rows if x.benchmark})
    end = curve[-1] if curve else None
    return TickerScore(
        ticker=ticker, decisions=len(decided), resolved=len(done),
        ratings=dict(Counter(x.rating for x in decided if x.rating)),
        hold_rate=_mean([float(x.rating == Rating.HOLD.value) for x in decided]),
        hit_rate=_mean(directional),
        mean_alpha_long=_mean([a for r, a, _ in done if RATING_SCORE[r] > 0]),
        mean_alpha_short=_mean([a for r, a, _ in done if RATING_SCORE[r] < 0]),
        mean_raw_return=_mean([raw for _, _, raw in done]),
        by_rating=[_rating_score(r, decided) for r in Rating], bearish=bearish,
        policy_return=end.policy - 1 if end else None,
        buy_hold_return=end.buy_hold - 1 if end else None,
        benchmark=" ".join(benchmarks) or None,
        benchmark_return=end.benchmark - 1 if end else None)


def scorecard(decisions: Iterable[DecisionOutcome], bearish: Bearish = DEFAULT_BEARISH
              ) -> list[TickerScore]:
    """One row per ticker (in order of appearance), then ``ALL``: tickers weighted equally."""
    rows = list(decisions)
    tickers = list(dict.fromkeys(x.ticker for x in rows))
    curves = {t: equity_curve([x for x in rows if x.ticker == t], bearish) for t in tickers}
    scores = [_score(t, [x for x in rows if x.ticker == t], curves[t], bearish) for t in tickers]
    if not rows:
        return []
    return scores + [_score(ALL, rows, combined_curve(list(curves.values())), bearish)]
