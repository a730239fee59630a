"""Structured outputs of the deciding roles, and how each renders to markdown."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from events.rating import Rating, TraderAction
from events.sentiment import (BAND_SCORE, SCORE_MAX, SCORE_MIN, Confidence, SentimentBand,
                              parse_band, parse_sentiment_line)

_NULLISH = {"", "none", "n/a", "na", "null", "tbd", "-", "unknown", "not applicable"}


def _nullish_to_none(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in _NULLISH:
        return None
    return value


OptionalPrice = Annotated[float | None, BeforeValidator(_nullish_to_none)]
OptionalText = Annotated[str | None, BeforeValidator(_nullish_to_none)]


class _Decision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    def render(self) -> str:
        """Markdown of the decision; every schema has its own."""
        raise NotImplementedError


#: The base of every decision schema.
Decision = _Decision


class ResearchPlan(_Decision):
    recommendation: Rating
    rationale: str = Field(description="Why, weighing the strongest bull and bear points.")
    strategic_actions: str = Field(description="Concrete steps for the trader.")

    def render(self) -> str:
        return (f"**Recommendation**: {self.recommendation.value}\n\n"
                f"**Rationale**: {self.rationale}\n\n**Strategic Actions**: {self.strategic_actions}")


class TradeProposal(_Decision):
    action: TraderAction
    reasoning: str
    entry_price: OptionalPrice = None
    stop_loss: OptionalPrice = None
    position_sizing: OptionalText = None

    def render(self) -> str:
        parts = [f"**Action**: {self.action.value}", f"**Reasoning**: {self.reasoning}"]
        if self.entry_price is not None:
            parts.append(f"**Entry Price**: {self.entry_price:.2f}")
        if self.stop_loss is not None:
            parts.append(f"**Stop Loss**: {self.stop_loss:.2f}")
        if self.position_sizing:
            parts.append(f"**Position Sizing**: {self.position_sizing}")
        parts.append(f"FINAL TRANSACTION PROPOSAL: **{self.action.value.upper()}**")
        return "\n\n".join(parts)


class PortfolioDecision(_Decision):
    rating: Rating
    executive_summary: str
    investment_thesis: str
    price_target: OptionalPrice = None
    time_horizon: OptionalText = None

    def render(self) -> str:
        parts = [f"**Rating**: {self.rating.value}",
                 f"**Executive Summary**: {self.executive_summary}",
                 f"**Investment Thesis**: {self.investment_thesis}"]
        if self.price_target is not None:
            parts.append(f"**Price Target**: {self.price_target:.2f}")
        if self.time_horizon:
            parts.append(f"**Time Horizon**: {self.time_horizon}")
        return "\n\n".join(parts)


class SentimentReport(_Decision):
    """The social analyst's structured report: overall band, score, confidence, narrative."""
    band: SentimentBand = Field(description="Overall sentiment band.")
    score: float = Field(description="0 = most bearish, 5 = neutral, 10 = most bullish.")
    confidence: Confidence = Field(description="How sure the read is, given how many posts "
                                   "and sources there were and how much they agree.")
    narrative: str = Field(description="The full report in markdown: what the posts and "
                           "news say, how strong and broad the mood is, the evidence table.")

    @model_validator(mode="before")
    @classmethod
    def _score_from_band(cls, data: Any) -> Any:
        """A reply without a usable score gets its band's score (events/sentiment.py)."""
        if isinstance(data, dict) and data.get("score") in (None, ""):
            band = data.get("band")
            known = band if isinstance(band, SentimentBand) else parse_band(str(band or ""))
            data = {**data, "score": BAND_SCORE[known]}
        return data

    @field_validator("score")
    @classmethod
    def _score_range(cls, value: float) -> float:
        if not SCORE_MIN <= value <= SCORE_MAX:
            raise ValueError(f"score {value} is outside {SCORE_MIN:g}..{SCORE_MAX:g}")
        return round(value, 2)

    @classmethod
    def freetext_fields(cls, text: str) -> dict[str, Any]:
        """Fields read from the report's own "Sentiment: <band>, score N, confidence C" line
        (the free-text fallback uses them over its generic guesses)."""
        return parse_sentiment_line(text) or {}

    def render(self) -> str:
        return (f"**Overall sentiment**: {self.band.value} (score {self.score:g} of 10, "
                f"{self.confidence.value} confidence)\n\n{self.narrative}")


#: Output schemas a role may ask the model for, by name (the name travels in LLM requests).
DECISION_SCHEMAS: dict[str, type[_Decision]] = {
    "ResearchPlan": ResearchPlan,
    "TradeProposal": TradeProposal,
    "PortfolioDecision": PortfolioDecision,
    "SentimentReport": SentimentReport,
}

OutputMode = Literal["structured", "tool", "freetext"]
