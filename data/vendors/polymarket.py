"""Polymarket vendor: prediction-market odds from Polymarket's public APIs (no key).

Markets are found with the Gamma API's public search (events and their markets). A market's
current ``outcomePrices`` are today's odds, which for a past trade date would be look-ahead:
for a past date the price of the first outcome is read from the CLOB price history instead,
the last point on or before the trade date (binary markets: the other outcome is 1 - p). A
market with no price by then keeps its question and no odds. The service drops every market
created after the trade date, and any price quoted after it."""
from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ..model import NoData, Prediction, RateLimited
from .base import Vendor

SEARCH_URL = "https://gamma-api.polymarket.com/public-search"
HISTORY_URL = "https://clob.polymarket.com/prices-history"
#: Days of price history read before a past trade date (the last point is used).
HISTORY_DAYS = 14


def _list(raw: Any) -> list:
    """Gamma encodes outcome lists as JSON text ('["Yes", "No"]'); accept lists too."""
    if isinstance(raw, list):
        return raw
    try:
        value = json.loads(raw or "[]")
    except (TypeError, ValueError):
        return []
    return value if isinstance(value, list) else []


def _stamp(raw: Any) -> dt.datetime | None:
    if not raw:
        return None
    try:
        when = dt.datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _float(raw: Any) -> float | None:
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None


class PolymarketVendor(Vendor):
    name = "polymarket"
    remote = True

    def __init__(self, session: Any = None, timeout: float = 20):
        self.session, self.timeout = session, timeout

    def _get(self, url: str, params: dict) -> Any:
        import requests
        resp = (self.session or requests).get(url, params=params, timeout=self.timeout)
        if resp.status_code == 429:
            raise RateLimited("HTTP 429")
        resp.raise_for_status()
        return resp.json()

    def predictions(self, query: str, trade_date: dt.date, limit: int) -> list[Prediction]:
        found = self._get(SEARCH_URL, {"q": query, "limit_per_type": 20,
                                       "keep_closed_markets": 1})
        markets = [(event, m) for event in (found or {}).get("events") or []
                   for m in event.get("markets") or []]
        if not markets:
            raise NoData(f"no Polymarket markets match {query!r}")
        live = trade_date >= dt.datetime.now(dt.timezone.utc).date()
        out = []
        for event, m in markets:
            created = _stamp(m.get("createdAt")) or _stamp(event.get("createdAt"))
            if created is None or created.date() > trade_date:
                continue  # opened after the trade date (or undated): never shown
            outcomes = tuple(str(o) for o in _list(m.get("outcomes")))
            closes = _stamp(m.get("endDate") or event.get("endDate"))
            out.append(Prediction(
                question=str(m.get("question") or event.get("title") or "?"), created=created,
                closes=closes.date() if closes else None, event=event.get("title"),
                outcomes=outcomes, volume=_float(m.get("volumeNum") or m.get("volume")),
                **self._odds(m, outcomes, trade_date, live)))
        out.sort(key=lambda p: -(p.volume or 0.0))
        return out[:limit]

    def _odds(self, market: dict, outcomes: tuple[str, ...], trade_date: dt.date,
              live: bool) -> dict:
        if live:
            prices = [_float(p) for p in _list(market.get("outcomePrices"))]
            if prices and all(p is not None for p in prices):
                return {"prices": tuple(p for p in prices if p is not None),
                        "priced_at": dt.datetime.now(dt.timezone.utc)}
            return {}
        tokens = _list(market.get("clobTokenIds"))
        if not tokens or len(outcomes) != 2:
            return {}
        end = dt.datetime.combine(trade_date, dt.time.max, dt.timezone.utc)
        start = end - dt.timedelta(days=HISTORY_DAYS)
        history = (self._get(HISTORY_URL, {"market": tokens[0], "startTs": int(start.timestamp()),
                                           "endTs": int(end.timestamp()), "fidelity": 60})
                   or {}).get("history") or []
        points = [(int(h["t"]), float(h["p"])) for h in history
                  if "t" in h and "p" in h and int(h["t"]) <= end.timestamp()]
        if not points:
            return {}
        t, p = max(points)
        return {"prices": (round(p, 4), round(1 - p, 4)),
                "priced_at": dt.datetime.fromtimestamp(t, dt.timezone.utc)}
