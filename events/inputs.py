"""Checks of what a user types (tickers, dates, language names): one line a user can act on
for each bad value. Plain Python, no pydantic, so commands that only read can use them."""
from __future__ import annotations

import datetime as dt
import re

from events.errors import InvalidInput

_TICKER = re.compile(r"^\^?[A-Z0-9][A-Z0-9._\-=]{0,30}$")  # "^" only leads (index symbols)
#: The first trade date any vendor can have bars for.
FIRST_TRADE_DATE = dt.date(1970, 1, 1)
#: A report language: a name of at most a few words of letters (hyphens inside words), never
#: free text (it goes into every prompt).
LANGUAGE_MAX_CHARS, LANGUAGE_MAX_WORDS = 32, 3
_WORD = r"[^\W\d_]+(?:-[^\W\d_]+)*"  # unicode letters, hyphen-joined
_LANGUAGE = re.compile(rf"^{_WORD}(?: {_WORD}){{0,{LANGUAGE_MAX_WORDS - 1}}}$")


def validate_ticker(raw: object) -> str:
    """Upper-cased ticker that is safe in a path, a file name and a query, or InvalidInput
    (also for a value that is not text at all, e.g. a number from a JSON or YAML list)."""
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise InvalidInput(_bad_ticker(raw))
    ticker = raw.strip().upper()
    if not ticker:
        raise InvalidInput("ticker is empty")
    if len(ticker) > 32:
        raise InvalidInput(f"ticker {raw!r} is longer than 32 characters")
    if ".." in ticker or set(ticker) <= {".", "-", "_"} or not _TICKER.match(ticker):
        raise InvalidInput(_bad_ticker(raw))
    return ticker


def _bad_ticker(raw: object) -> str:
    return (f"ticker {raw!r} is not a valid symbol (letters, digits and . - _ = only, starting "
            "with a letter, a digit or an index's ^; e.g. NVDA, BRK-B, 7203.T, ^GSPC)")


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
