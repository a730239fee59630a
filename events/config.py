"""A run's whole configuration. It is the payload of RunRequested, so a resumed run, a replay
and a fork need nothing but the events."""
from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

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
}
OFFLINE_VENDORS: dict[str, tuple[str, ...]] = {k: ("synthetic",) for k in DEFAULT_VENDORS}
_MARKET = ("prices", "indicators", "fundamentals", "news", "identity")
#: Every data vendor and the categories it can serve: the one catalogue of vendor names.
VENDOR_CATEGORIES: dict[str, tuple[str, ...]] = {
    "yfinance": _MARKET, "alpha_vantage": _MARKET,
    "reddit": ("social",), "stocktwits": ("social",),
    "local": tuple(DEFAULT_VENDORS), "synthetic": tuple(DEFAULT_VENDORS),
}

_TICKER = re.compile(r"^\^?[A-Z0-9][A-Z0-9._\-=]{0,30}$")  # "^" only leads (index symbols)
#: The first trade date any vendor can have bars for.
FIRST_TRADE_DATE = dt.date(1970, 1, 1)
#: A report language: a name of at most a few words of letters (hyphens inside words), never
#: free text (it goes into every prompt).
LANGUAGE_MAX_CHARS, LANGUAGE_MAX_WORDS = 32, 3
_WORD = r"[^\W\d_]+(?:-[^\W\d_]+)*"  # unicode letters, hyphen-joined
_LANGUAGE = re.compile(rf"^{_WORD}(?: {_WORD}){{0,{LANGUAGE_MAX_WORDS - 1}}}$")


class InvalidInput(ValueError):
    """Bad user input: the message is one line a user can act on."""


def validate_ticker(raw: str) -> str:
    """Upper-cased ticker that is safe in a path, a file name and a query, or InvalidInput."""
    ticker = (raw or "").strip().upper()
    if not ticker:
        raise InvalidInput("ticker is empty")
    if len(ticker) > 32:
        raise InvalidInput(f"ticker {raw!r} is longer than 32 characters")
    if ".." in ticker or set(ticker) <= {".", "-", "_"} or not _TICKER.match(ticker):
        raise InvalidInput(
            f"ticker {raw!r} is not a valid symbol (letters, digits and . - _ = only, starting "
            "with a letter, a digit or an index's ^; e.g. NVDA, BRK-B, 7203.T, ^GSPC)")
    return ticker


def validate_trade_date(raw: str | dt.date, today: dt.date | None = None) -> dt.date:
    """A trade date that exists and is not in the future, or InvalidInput."""
    if isinstance(raw, dt.date):
        day = raw
    else:
        try:
            day = dt.date.fromisoformat(str(raw).strip())
        except ValueError:
            raise InvalidInput(f"date {raw!r} is not a date in YYYY-MM-DD form") from None
    today = today or dt.date.today()
    if day < FIRST_TRADE_DATE:
        raise InvalidInput(f"date {day} is before {FIRST_TRADE_DATE}: no vendor has bars "
                           "that old")
    if day > today:
        raise InvalidInput(f"date {day} is in the future (today is {today}): "
                           "research can only use what was known on the trade date")
    return day


def validate_language(raw: str) -> str:
    """A language name such as "English", "Brazilian Portuguese" or "Serbo-Croatian", or
    InvalidInput: letters, single spaces and hyphens, at most 3 words and 32 characters."""
    name = str(raw).strip()
    if not name:
        raise InvalidInput("language is empty")
    if len(name) > LANGUAGE_MAX_CHARS or not _LANGUAGE.match(name):
        shown = name if len(name) <= 40 else name[:39] + "…"
        raise InvalidInput(
            f"language {shown!r} is not a language name (letters, spaces and hyphens only, "
            f"at most {LANGUAGE_MAX_WORDS} words and {LANGUAGE_MAX_CHARS} characters; "
            "e.g. Japanese, Brazilian Portuguese)")
    return name


class RunConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

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
        return {**DEFAULT_VENDORS, **value}

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
