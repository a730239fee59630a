"""The social analyst's sentiment scale and its deterministic free-text parsers (the one
place for both, as events/rating.py is for ratings).

Why a band and a score: the band is what a reader acts on (six words, including "Mixed" for
loud disagreement, which no single score can say); the 0-10 score orders runs and tickers.
A reply that gives a band but no usable score gets the band's middle score."""
from __future__ import annotations

import re
from enum import StrEnum


class SentimentBand(StrEnum):
    BULLISH = "Bullish"
    MILDLY_BULLISH = "Mildly Bullish"
    NEUTRAL = "Neutral"
    MIXED = "Mixed"
    MILDLY_BEARISH = "Mildly Bearish"
    BEARISH = "Bearish"


class Confidence(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


#: The score (0 most bearish .. 10 most bullish) a band stands for when none is given.
BAND_SCORE: dict[SentimentBand, float] = {
    SentimentBand.BULLISH: 8.5, SentimentBand.MILDLY_BULLISH: 6.5, SentimentBand.NEUTRAL: 5.0,
    SentimentBand.MIXED: 5.0, SentimentBand.MILDLY_BEARISH: 3.5, SentimentBand.BEARISH: 1.5}
#: Lower score bound of each directional band, most bullish first (Mixed is not a score:
#: it says the evidence disagrees).
_BAND_FLOOR: tuple[tuple[float, SentimentBand], ...] = (
    (7.5, SentimentBand.BULLISH), (5.75, SentimentBand.MILDLY_BULLISH),
    (4.25, SentimentBand.NEUTRAL), (2.5, SentimentBand.MILDLY_BEARISH),
    (0.0, SentimentBand.BEARISH))
SCORE_MIN, SCORE_MAX = 0.0, 10.0

_BY_WORDS = {b.value.lower(): b for b in SentimentBand}
_BAND_WORD = re.compile(r"\b(mildly\s+bullish|mildly\s+bearish|bullish|bearish|neutral|mixed)\b",
                        re.IGNORECASE)
_LINE = re.compile(r"^[\s>*#\-|]*(?:overall\s+)?(?:sentiment|band)(?:\s+band)?[\s*]*[:\-]"
                   r"[\s*]*(mildly\s+bullish|mildly\s+bearish|bullish|bearish|neutral|mixed)\b"
                   r"(?P<rest>.*)$", re.IGNORECASE | re.MULTILINE)
_SCORE = re.compile(r"\bscore[\s*]*[:=]?[\s*]*(\d+(?:\.\d+)?)(?:\s*(?:/|out of|of)\s*10)?",
                    re.IGNORECASE)
_CONFIDENCE = re.compile(r"\bconfidence[\s*]*[:=]?[\s*]*(low|medium|high)\b|"
                         r"\b(low|medium|high)\s+confidence\b", re.IGNORECASE)


def _band(words: str) -> SentimentBand:
    return _BY_WORDS[" ".join(words.lower().split())]


def band_for_score(score: float) -> SentimentBand:
    """The directional band a score falls in."""
    return next(band for floor, band in _BAND_FLOOR if score >= floor)


def parse_band(text: str, default: SentimentBand = SentimentBand.NEUTRAL) -> SentimentBand:
    """A "Sentiment: X" (or "Band: X") line wins; else the first band phrase; else default."""
    line = _LINE.search(text or "")
    if line:
        return _band(line.group(1))
    match = _BAND_WORD.search(text or "")
    return _band(match.group(1)) if match else default


def parse_confidence(text: str, default: Confidence = Confidence.LOW) -> Confidence:
    """"Confidence: high" or "high confidence"; else ``default`` (low: nobody said)."""
    match = _CONFIDENCE.search(text or "")
    return Confidence((match.group(1) or match.group(2)).lower()) if match else default


def parse_score(text: str) -> float | None:
    """A "score N" (N in 0..10, "/10" allowed) from ``text``, else None."""
    match = _SCORE.search(text or "")
    if not match:
        return None
    value = float(match.group(1))
    return value if SCORE_MIN <= value <= SCORE_MAX else None


def parse_sentiment_line(text: str) -> dict | None:
    """The fields the report's own labelled line gives ("Sentiment: Mildly Bullish, score
    6.5, confidence medium"; the last such line): always the band, the score and the
    confidence when the line has them. None when the report has no such line."""
    lines = list(_LINE.finditer(text or ""))
    if not lines:
        return None
    last = lines[-1]
    rest = last.group("rest")
    found: dict = {"band": _band(last.group(1)).value, "score": parse_score(rest)}
    if _CONFIDENCE.search(rest):
        found["confidence"] = parse_confidence(rest).value
    return {k: v for k, v in found.items() if v is not None}
