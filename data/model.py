"""What vendors hand back, and how they say they cannot.

Vendors return plain records (dated, so the service can drop anything after the trade date in
one place) and signal "I have nothing" with exceptions, so the router can tell an empty answer
from a broken vendor without inspecting return values."""
from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class NoData(LookupError):
    """The vendor answered: it has nothing for this request. The next vendor is tried."""


class NotConfigured(NoData):
    """The vendor cannot answer at all here (no API key, no data folder): no answer, skip."""


class RateLimited(RuntimeError):
    """The vendor refused for now; the router moves on to the next vendor."""


class AuthFailed(RuntimeError):
    """The vendor refused our credentials (a missing, invalid or demo key): no retry and no
    rate-limit wait helps; the message names the variable to fix."""


class Rec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Period(Rec):
    """One column of a financial statement. ``filed`` is known for some vendors only."""
    period_end: dt.date
    filed: dt.date | None = None
    values: dict[str, float | None] = Field(default_factory=dict)


class NewsItem(Rec):
    published: dt.datetime
    title: str
    publisher: str | None = None
    summary: str | None = None
    link: str | None = None


class InsiderTx(Rec):
    date: dt.date
    insider: str
    relation: str | None = None
    text: str | None = None
    shares: float | None = None
    value: float | None = None


class Post(Rec):
    created: dt.datetime
    source: str
    author: str | None = None
    text: str
    score: float | None = None
    sentiment: str | None = None


class Observation(Rec):
    """One value of a macro series (FRED), as it was published by the trade date."""
    date: dt.date
    value: float


class Prediction(Rec):
    """One prediction market: its question, when it opened, and the price of each outcome
    (0..1, read as a probability) at ``priced_at``; no prices when none was quoted by the
    trade date."""
    question: str
    created: dt.datetime
    closes: dt.date | None = None
    event: str | None = None
    outcomes: tuple[str, ...] = ()
    prices: tuple[float, ...] = ()
    priced_at: dt.datetime | None = None
    volume: float | None = None


class Fundamentals(Rec):
    """Key statistics. ``as_of`` is when the numbers were true; None means 'today' (live)."""
    as_of: dt.date | None = None
    values: dict[str, Any] = Field(default_factory=dict)


#: Texts vendors put where a value is missing (Yahoo profiles carry "None", "n/a", "-", ...):
#: never a company's name, sector or industry.
PLACEHOLDERS = frozenset({"", "none", "null", "nan", "n/a", "na", "n.a.", "-", "--", "—",
                          "?", "unknown", "not available", "not applicable"})


def present(value: Any) -> str | None:
    """``value`` as trimmed text, or None when it is missing or a placeholder."""
    if value is None or isinstance(value, float) and value != value:
        return None
    text = " ".join(str(value).split())
    return None if text.lower() in PLACEHOLDERS else text


def day_of(ts: dt.datetime | dt.date) -> dt.date:
    """The calendar day of a timestamp in UTC: the unit every look-ahead guard compares."""
    if isinstance(ts, dt.datetime):
        if ts.tzinfo is not None:
            ts = ts.astimezone(dt.timezone.utc)
        return ts.date()
    return ts
