"""Local-files vendor: a folder the user controls, for offline work and reproducible tests.

Layout of ``<data_dir>`` (every file optional; a missing file is "no data", not an error):

* ``<SYMBOL>.csv`` - daily OHLCV with a header naming Date, Open, High, Low, Close, Volume in
  any order (both ``Date,Open,High,Low,Close,Volume`` and ``Date,Close,High,Low,Open,Volume``
  occur in the wild); extra columns such as Adj Close are ignored.
* ``<SYMBOL>.info.json`` - ``{"name", "sector", "industry", "exchange", "currency",
  "fundamentals": {"as_of": "YYYY-MM-DD", "values": {...}}}``
* ``<SYMBOL>.statements.json`` - ``{"income"|"balance"|"cashflow": {"annual"|"quarterly":
  [{"period_end": "YYYY-MM-DD", "filed": "YYYY-MM-DD" (optional), "values": {...}}]}}``
* ``<SYMBOL>.news.json`` and ``_GLOBAL.news.json`` - ``[{"published": ISO datetime, "title",
  "publisher", "summary", "link"}]``
* ``<SYMBOL>.insider.json`` - ``[{"date", "insider", "relation", "text", "shares", "value"}]``
* ``<SYMBOL>.social.json`` - ``[{"created", "source", "author", "text", "score"}]``

SYMBOL is the Yahoo spelling (already validated, so safe as a file name)."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from ..frames import between, normalize_bars
from ..model import Fundamentals, InsiderTx, NewsItem, NoData, NotConfigured, Period, Post
from .base import Vendor

GLOBAL = "_GLOBAL"


class LocalVendor(Vendor):
    name = "local"

    def __init__(self, data_dir: str | Path | None):
        self.data_dir = Path(data_dir) if data_dir else None

    def _file(self, symbol: str, suffix: str) -> Path:
        if self.data_dir is None:
            raise NotConfigured("no data folder configured (data_dir)")
        if not self.data_dir.is_dir():
            raise NotConfigured(f"data folder {self.data_dir} does not exist")
        path = self.data_dir / f"{symbol}{suffix}"
        if not path.is_file():
            raise NoData(f"no file {path.name} in {self.data_dir}")
        return path

    def _json(self, symbol: str, suffix: str):
        return json.loads(self._file(symbol, suffix).read_text())

    def prices(self, symbol: str, start: dt.date, end: dt.date):
        import pandas as pd
        raw = pd.read_csv(self._file(symbol, ".csv"))
        bars = between(normalize_bars(raw), start, end)
        if bars.empty:
            raise NoData(f"{symbol}.csv has no bars between {start} and {end}")
        return bars

    def identity(self, symbol: str) -> dict:
        info = self._json(symbol, ".info.json")
        return {k: info.get(k) for k in ("name", "sector", "industry", "exchange", "currency")}

    def fundamentals(self, symbol: str, as_of: dt.date) -> Fundamentals:
        block = self._json(symbol, ".info.json").get("fundamentals")
        if not block:
            raise NoData(f"{symbol}.info.json has no fundamentals")
        return Fundamentals.model_validate(block)

    def statement(self, symbol: str, kind: str, freq: str) -> list[Period]:
        rows = self._json(symbol, ".statements.json").get(kind, {}).get(freq, [])
        return [Period.model_validate(r) for r in rows]

    def insider(self, symbol: str) -> list[InsiderTx]:
        return [InsiderTx.model_validate(r) for r in self._json(symbol, ".insider.json")]

    def news(self, symbol: str, start: dt.date, end: dt.date) -> list[NewsItem]:
        return [NewsItem.model_validate(r) for r in self._json(symbol, ".news.json")]

    def global_news(self, start: dt.date, end: dt.date, limit: int) -> list[NewsItem]:
        return [NewsItem.model_validate(r) for r in self._json(GLOBAL, ".news.json")]

    def social(self, symbol: str, start: dt.date, end: dt.date) -> list[Post]:
        return [Post.model_validate(r) for r in self._json(symbol, ".social.json")]
