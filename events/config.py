"""A run's whole configuration. It is the payload of RunRequested, so a resumed run, a replay
and a fork need nothing but the events."""
from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from events.errors import InvalidInput  # noqa: F401 - re-exported: its home is events.errors
from events.inputs import validate_language, validate_ticker, validate_trade_date

Analyst = Literal["market", "social", "news", "fundamentals"]
ANALYSTS: tuple[Analyst, ...] = ("market", "social", "news", "fundamentals")

#: Data categories the router knows, with the default vendor chain of each.
DEFAULT_VENDORS: dict[str, tuple[str, ...]] = {
    "prices": ("yfinance",),
    "indicators": ("yfinance",),
    "fundamentals": ("yfinance",),
    "news": ("yfinance",),
    "social": ("reddit", "stocktwits"),
    "identity": ("yfinance",),
    "macro": ("fred",),
    "predictions": ("polymarket",),
}
OFFLINE_VENDORS: dict[str, tuple[str, ...]] = {k: ("synthetic",) for k in DEFAULT_VENDORS}
_MARKET = ("prices", "indicators", "fundamentals", "news", "identity")
#: Every data vendor and the categories it can serve: the one catalogue of vendor names.
VENDOR_CATEGORIES: dict[str, tuple[str, ...]] = {
    "yfinance": _MARKET, "alpha_vantage": _MARKET,
    "reddit": ("social",), "stocktwits": ("social",),
    "fred": ("macro",), "polymarket": ("predictions",),
    "local": tuple(DEFAULT_VENDORS), "synthetic": tuple(DEFAULT_VENDORS),
}

#: Categories added after the first six: a configuration that names a news chain but not
#: these (an older run, a hand-written one) gets, for each, the news vendors that can serve
#: it, else its default; so an all-synthetic or all-local configuration stays offline.
_FOLLOW_NEWS = ("macro", "predictions")


def complete_chains(value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """``value`` with every category: the given chains, then the rule above, then defaults."""
    merged = {k: tuple(v) for k, v in value.items()}
    for category in _FOLLOW_NEWS:
        if category not in merged:
            follow = tuple(v for v in merged.get("news", ())
                           if category in VENDOR_CATEGORIES.get(v, ()))
            if follow:
                merged[category] = follow
    return {**DEFAULT_VENDORS, **merged}


#: The RunConfig fields a resume may change (RunResumed.settings): how to talk to the
#: model's server, never what the run researches or how it decides.
RESUMABLE_SETTINGS = ("llm_concurrency", "llm_idle_timeout_s", "llm_timeout_s", "context_window")


class RunConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    ticker: str
    trade_date: dt.date
    analysts: tuple[Analyst, ...] = ANALYSTS
    debate_rounds: int = Field(1, ge=1, le=10)
    risk_rounds: int = Field(1, ge=1, le=10)
    quick_model: str = "offline/quick"
    deep_model: str = "offline/deep"
    base_url: str | None = None
    temperature: float | None = None
    output_language: str = "English"
    vendors: dict[str, tuple[str, ...]] = Field(default_factory=lambda: dict(DEFAULT_VENDORS))
    tool_vendors: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    data_dir: str | None = None
    max_tool_calls: int = Field(6, ge=1, le=50)
    holding_days: int = Field(5, ge=1, le=250)
    benchmark: str | None = None
    token_budget: int | None = Field(None, ge=1)
    cost_budget_usd: float | None = Field(None, gt=0)
    llm_max_retries: int = Field(3, ge=0, le=10)
    #: overall cap on one model call; None: 1800 s for a local endpoint, 600 s for hosted
    llm_timeout_s: float | None = Field(None, gt=0)
    llm_idle_timeout_s: float = Field(120.0, gt=0)  # no token for this long fails a try
    context_window: int | None = Field(None, ge=512)  # tokens; else server / capability table
    llm_concurrency: int | None = Field(None, ge=1, le=256)  # calls in flight per endpoint
    offline_latency_s: float = Field(0.0, ge=0)
    #: Freshness of the verified snapshot: its last bar at most this many trading days
    #: (weekdays) before the trade date, else no snapshot (data/snapshot.py).
    max_stale_days: int = Field(5, ge=0, le=3650)

    @field_validator("ticker")
    @classmethod
    def _ticker(cls, value: str) -> str:
        return validate_ticker(value)

    @field_validator("trade_date")
    @classmethod
    def _trade_date(cls, value: dt.date) -> dt.date:
        return validate_trade_date(value)

    @field_validator("output_language")
    @classmethod
    def _language(cls, value: str) -> str:
        return validate_language(value)

    @field_validator("benchmark")
    @classmethod
    def _benchmark(cls, value: str | None) -> str | None:
        return validate_ticker(value) if value else None

    @field_validator("analysts")
    @classmethod
    def _analysts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one analyst is needed")
        if len(set(value)) != len(value):
            raise ValueError(f"analysts repeat: {', '.join(value)}")
        return tuple(a for a in ANALYSTS if a in value)  # canonical order

    @field_validator("vendors")
    @classmethod
    def _vendors(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        unknown = set(value) - set(DEFAULT_VENDORS)
        if unknown:
            raise ValueError(f"unknown data categories: {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(DEFAULT_VENDORS)}")
        for category, chain in value.items():
            for vendor in chain:
                if category not in VENDOR_CATEGORIES.get(vendor, ()):
                    able = [v for v, cats in VENDOR_CATEGORIES.items() if category in cats]
                    raise ValueError(f"vendor {vendor!r} cannot serve {category}; "
                                     f"choose from {', '.join(able)}")
        return complete_chains(value)

    @field_validator("tool_vendors")
    @classmethod
    def _tool_vendors(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        unknown = {v for chain in value.values() for v in chain} - set(VENDOR_CATEGORIES)
        if unknown:
            raise ValueError(f"unknown data vendors: {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(VENDOR_CATEGORIES)}")
        return value

    @property
    def is_offline(self) -> bool:
        return self.quick_model.startswith("offline/") and self.deep_model.startswith("offline/")
