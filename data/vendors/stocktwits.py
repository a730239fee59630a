"""StockTwits vendor: the keyless public symbol stream (up to 30 latest messages).

Any failure is raised to the service, which reports the vendor as unavailable: social
chatter is optional colour, never a reason for a run to stop."""
from __future__ import annotations

import datetime as dt
from typing import Any

from ..model import NoData, Post
from .base import Vendor

LIMIT = 30


class StocktwitsVendor(Vendor):
    name = "stocktwits"
    remote = True

    def __init__(self, session: Any = None, timeout: float = 15):
        self.session, self.timeout = session, timeout

    def social(self, symbol: str, start: dt.date, end: dt.date) -> list[Post]:
        import requests
        http = self.session or requests
        resp = http.get(f"https://api.stocktwits.com/api/2/streams/symbol/{symbol}.json",
                        headers={"User-Agent": "ta-actors/0.1"}, timeout=self.timeout)
        resp.raise_for_status()
        posts = []
        for m in (resp.json().get("messages") or [])[:LIMIT]:
            sentiment = ((m.get("entities") or {}).get("sentiment") or {}).get("basic")
            posts.append(Post(
                created=dt.datetime.fromisoformat(m["created_at"].replace("Z", "+00:00")),
                source="stocktwits", author=(m.get("user") or {}).get("username"),
                text=(m.get("body") or "")[:600], sentiment=sentiment.lower() if sentiment
                else None, score=((m.get("likes") or {}).get("total"))))
        if not posts:
            raise NoData(f"no StockTwits messages for {symbol}")
        return posts
