"""FRED vendor: macro indicators from the St. Louis Fed (needs FRED_API_KEY).

Why vintages: FRED revises history (CPI, payrolls and GDP are re-estimated for months), so
today's series is not what a trader saw on the trade date. Every request sets
``realtime_start = realtime_end = trade date``, which makes FRED (its ALFRED archive) answer
with the observations as published on that day: nothing released later, no later revision.
The service still drops any observation dated after the trade date.

Without a key the vendor is "not configured" (the tool then says FRED_API_KEY is not set);
a key FRED refuses is AuthFailed naming the variable; HTTP 429 is RateLimited."""
from __future__ import annotations

import datetime as dt
from typing import Any

from ..model import AuthFailed, NoData, NotConfigured, Observation, RateLimited
from .base import Vendor

URL = "https://api.stlouisfed.org/fred/series/observations"
KEY_ENV = "FRED_API_KEY"
#: FRED writes a missing observation as "."
_MISSING = {".", ""}


def _error_text(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        return " ".join(resp.text.split())[:200]
    message = body.get("error_message") if isinstance(body, dict) else None
    return " ".join(str(message or body).split())[:200]


class FredVendor(Vendor):
    name = "fred"
    remote = True

    def __init__(self, api_key: str | None, session: Any = None, timeout: float = 30):
        self.api_key, self.session, self.timeout = api_key, session, timeout

    def macro(self, series_id: str, start: dt.date, end: dt.date,
              as_of: dt.date) -> list[Observation]:
        """Observations of ``series_id`` dated ``start``..``end``, as published on ``as_of``."""
        if not self.api_key:
            raise NotConfigured(f"{KEY_ENV} is not set")
        import requests
        http = self.session or requests
        resp = http.get(URL, timeout=self.timeout, params={
            "series_id": series_id, "api_key": self.api_key, "file_type": "json",
            "observation_start": start.isoformat(), "observation_end": end.isoformat(),
            "realtime_start": as_of.isoformat(), "realtime_end": as_of.isoformat(),
            "sort_order": "asc"})
        if resp.status_code == 429:
            raise RateLimited(f"HTTP 429: {_error_text(resp)}")
        if resp.status_code in (400, 401, 403):
            text = _error_text(resp)
            if "api_key" in text.lower() or resp.status_code in (401, 403):
                raise AuthFailed(f"FRED refused the key in {KEY_ENV}: {text}")
            raise NoData(f"FRED: {text}")
        resp.raise_for_status()
        rows = resp.json().get("observations") or []
        out = [Observation(date=dt.date.fromisoformat(r["date"]), value=float(r["value"]))
               for r in rows if r.get("date") and str(r.get("value", ".")) not in _MISSING]
        if not out:
            raise NoData(f"no {series_id} observations between {start} and {end} "
                         f"published by {as_of}")
        return out
