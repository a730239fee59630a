"""How good were the decisions? Hit rate and alpha by rating, from resolved memory entries."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from events.rating import RATING_SCORE, Rating
from projections.memory import MemoryEntry


@dataclass(frozen=True, slots=True)
class Score:
    ticker: str  # "ALL" for the whole set
    decisions: int
    resolved: int
    ratings: dict[str, int] = field(default_factory=dict)
    hit_rate: float | None = None  # share of directional calls whose alpha had the same sign
    mean_alpha_long: float | None = None  # Buy / Overweight
    mean_alpha_short: float | None = None  # Underweight / Sell
    mean_raw_return: float | None = None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _score(ticker: str, entries: list[MemoryEntry]) -> Score:
    done = [m for m in entries if m.outcome is not None]
    direction = [(RATING_SCORE[Rating(m.rating)], m.outcome.alpha) for m in done
                 if RATING_SCORE[Rating(m.rating)] != 0]
    hits = [1.0 if (s > 0) == (a > 0) else 0.0 for s, a in direction]
    return Score(
        ticker, len(entries), len(done), dict(Counter(m.rating for m in entries)),
        _mean(hits),
        _mean([m.outcome.alpha for m in done if RATING_SCORE[Rating(m.rating)] > 0]),
        _mean([m.outcome.alpha for m in done if RATING_SCORE[Rating(m.rating)] < 0]),
        _mean([m.outcome.raw_return for m in done]))


def scorecard(entries: Iterable[MemoryEntry], run_ids: set[str] | None = None) -> list[Score]:
    """One Score per ticker, then one for all; ``run_ids`` narrows to a backtest's runs."""
    chosen = [m for m in entries if run_ids is None or m.run_id in run_ids]
    tickers = sorted({m.ticker for m in chosen})
    rows = [_score(t, [m for m in chosen if m.ticker == t]) for t in tickers]
    return rows + [_score("ALL", chosen)] if chosen else []
