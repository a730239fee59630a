"""What a backtest records beyond its runs: the policy that follows the ratings, and the
scorecard rows (carried by BacktestCompleted, so they are typed records here, not dicts)."""
from __future__ import annotations

from typing import Literal

from events.rating import Rating
from events.records import Record

#: What the policy does on a bearish rating (Underweight, Sell): go short, or stay flat.
Bearish = Literal["short", "flat"]
BEARISH_CHOICES: tuple[Bearish, ...] = ("short", "flat")
DEFAULT_BEARISH: Bearish = "short"

#: Position the policy takes on each rating (+1 long, 0 flat, -1 short), per bearish choice.
POSITION: dict[Bearish, dict[Rating, int]] = {
    "short": {Rating.BUY: 1, Rating.OVERWEIGHT: 1, Rating.HOLD: 0, Rating.UNDERWEIGHT: -1,
              Rating.SELL: -1},
    "flat": {Rating.BUY: 1, Rating.OVERWEIGHT: 1, Rating.HOLD: 0, Rating.UNDERWEIGHT: 0,
             Rating.SELL: 0},
}


class RatingScore(Record):
    """How the calls of one tier did: hit rate (see events.rating.call_was_right) and alpha."""
    rating: Rating
    decisions: int
    resolved: int
    hit_rate: float | None = None
    mean_alpha: float | None = None


class TickerScore(Record):
    """One scorecard row: a ticker, or ``ALL`` (tickers weighted equally). Returns are
    fractions; ``None`` while nothing is resolved."""
    ticker: str
    decisions: int
    resolved: int
    ratings: dict[str, int]
    hold_rate: float | None = None  # share of decisions rated Hold
    hit_rate: float | None = None  # directional calls only (not Hold)
    mean_alpha_long: float | None = None  # Buy / Overweight
    mean_alpha_short: float | None = None  # Underweight / Sell
    mean_raw_return: float | None = None
    by_rating: list[RatingScore] = []
    bearish: Bearish = DEFAULT_BEARISH
    policy_return: float | None = None  # the rating-following policy, compounded
    buy_hold_return: float | None = None  # long over the same holding periods
    benchmark: str | None = None
    benchmark_return: float | None = None  # the benchmark over the same holding periods
