"""The five-tier rating scale and its deterministic free-text parser (the one place for both)."""
from __future__ import annotations

import re
from enum import StrEnum


class Rating(StrEnum):
    BUY = "Buy"
    OVERWEIGHT = "Overweight"
    HOLD = "Hold"
    UNDERWEIGHT = "Underweight"
    SELL = "Sell"


class TraderAction(StrEnum):
    BUY = "Buy"
    HOLD = "Hold"
    SELL = "Sell"


#: Numeric score per tier, +2 (most bullish) .. -2; used for scorecards and the hit rate.
RATING_SCORE: dict[Rating, int] = {
    Rating.BUY: 2, Rating.OVERWEIGHT: 1, Rating.HOLD: 0, Rating.UNDERWEIGHT: -1, Rating.SELL: -2,
}

#: A Hold is judged right when the alpha stayed inside this band (a fraction: 1%).
HOLD_BAND = 0.01


def call_was_right(rating: Rating, alpha: float) -> bool:
    """Did the call match what the market did? Bullish tiers need positive alpha, bearish ones
    negative alpha, and a Hold an alpha within ``HOLD_BAND`` of zero (the one rule shared by
    the scorecard's hit rate and the offline reflector)."""
    score = RATING_SCORE[rating]
    return alpha > 0 if score > 0 else alpha < 0 if score < 0 else abs(alpha) < HOLD_BAND


_TIER_BY_WORD = {r.value.lower(): r for r in Rating}
_TIER_WORD = re.compile(r"\b(" + "|".join(_TIER_BY_WORD) + r")\b", re.IGNORECASE)
_RATING_LINE = re.compile(r"rating.*?[:\-][\s*]*(\w+)", re.IGNORECASE)
_ACTION_WORD = re.compile(r"\b(buy|hold|sell)\b", re.IGNORECASE)


def parse_rating(text: str, default: Rating = Rating.HOLD) -> Rating:
    """Rating from free text without another model call.

    A "Rating: X" line wins (the first one naming a tier); otherwise the first tier word
    anywhere; otherwise ``default``. Deterministic, so replay re-derives the same rating.
    """
    for line in (text or "").splitlines():
        match = _RATING_LINE.search(line)
        if match and match.group(1).lower() in _TIER_BY_WORD:
            return _TIER_BY_WORD[match.group(1).lower()]
    match = _TIER_WORD.search(text or "")
    return _TIER_BY_WORD[match.group(1).lower()] if match else default


def parse_action(text: str, default: TraderAction = TraderAction.HOLD) -> TraderAction:
    """Trader action from free text: the word after FINAL TRANSACTION PROPOSAL, else the first
    buy/hold/sell word, else ``default``."""
    tail = (text or "").upper().rpartition("FINAL TRANSACTION PROPOSAL")[2] or (text or "")
    match = _ACTION_WORD.search(tail) or _ACTION_WORD.search(text or "")
    return TraderAction(match.group(1).capitalize()) if match else default


def rating_to_action(rating: Rating) -> TraderAction:
    return {Rating.BUY: TraderAction.BUY, Rating.OVERWEIGHT: TraderAction.BUY,
            Rating.SELL: TraderAction.SELL, Rating.UNDERWEIGHT: TraderAction.SELL}.get(
        rating, TraderAction.HOLD)
