"""The capability methods a vendor may implement, and small helpers they share.

A method the vendor does not define is simply skipped by the router. Every method either
returns records (possibly covering more than asked; the service filters to the trade date) or
raises NoData / NotConfigured / RateLimited / any other exception for a real failure."""
from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from ..model import Fundamentals, InsiderTx, NewsItem, Period, Post

STATEMENT_KINDS = ("balance", "cashflow", "income")
FREQS = ("annual", "quarterly")
#: Capability name -> router category, used to pick the vendor chain.
CAPABILITIES = {
    "prices": "prices", "identity": "identity", "fundamentals": "fundamentals",
    "statement": "fundamentals", "insider": "fundamentals", "news": "news",
    "global_news": "news", "social": "social", "macro": "macro",
    "predictions": "predictions",
}


class Vendor:
    name = "base"
    #: True for vendors that go over the network and so benefit from the download cache.
    remote = False

    # Signatures, for reference (not defined here so hasattr() tells what a vendor can do):
    # prices(symbol, start, end) -> pd.DataFrame  (frames.normalize_bars shape)
    # identity(symbol) -> dict  (name, sector, industry, exchange, currency)
    # fundamentals(symbol, as_of) -> Fundamentals
    # statement(symbol, kind, freq) -> list[Period]
    # insider(symbol) -> list[InsiderTx]
    # news(symbol, start, end) -> list[NewsItem]
    # global_news(start, end, limit) -> list[NewsItem]
    # social(symbol, start, end) -> list[Post]
    # macro(series_id, start, end, as_of) -> list[Observation]  (as published on as_of)
    # predictions(query, trade_date, limit) -> list[Prediction]


def stable_seed(*parts: Any) -> int:
    """A seed that is the same in every process (unlike hash(), which is salted per run)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def as_date(value: Any) -> dt.date | None:
    if value in (None, ""):
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc).date()
    return dt.date.fromisoformat(str(value)[:10])


__all__ = ["Vendor", "Fundamentals", "InsiderTx", "NewsItem", "Period", "Post",
           "STATEMENT_KINDS", "FREQS", "CAPABILITIES", "stable_seed", "as_date"]
