"""DuckDB download cache for remote vendors (a separate file from the event store).

Why: Yahoo rate-limits, and a run must still work offline after one online fetch. Rules:
an entry covers a symbol and a date range and is served only for requests inside that range
(never data past what was fetched); an empty entry is never stored or served, so a poisoned
fetch is retried; when the vendor fails, any stored overlap is served instead of failing.
The file is opened per operation, so several processes can share it; if it is locked or
unreadable the cache steps aside rather than failing the data call."""
from __future__ import annotations

import datetime as dt
import functools
import json
from pathlib import Path
from typing import Any, Callable

import structlog
from pydantic import BaseModel

from .frames import between, normalize_bars
from .model import Fundamentals, InsiderTx, NewsItem, NoData, NotConfigured, Period

log = structlog.get_logger(__name__)
_TTL = dt.timedelta(days=1)
_DDL = """CREATE TABLE IF NOT EXISTS entries (vendor VARCHAR, kind VARCHAR, key VARCHAR,
  start_day DATE, end_day DATE, fetched_at TIMESTAMP, n INTEGER, payload VARCHAR)"""
_RECORDS: dict[str, type[BaseModel]] = {"news": NewsItem, "global_news": NewsItem, "statement": Period, "insider": InsiderTx}


class Cache:
    def __init__(self, path: str | Path):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._run(lambda con: None)

    def _run(self, fn: Callable[[Any], Any]) -> Any:
        import duckdb
        try:
            con = duckdb.connect(self.path)
        except Exception as exc:  # locked by another process, unreadable, ...
            log.warning("data cache unavailable", path=self.path, error=str(exc))
            return None
        try:
            con.execute(_DDL)
            return fn(con)
        finally:
            con.close()

    def put(self, vendor: str, kind: str, key: str, start: dt.date | None,
            end: dt.date | None, n: int, payload: str) -> None:
        if n <= 0:
            return
        self._run(lambda con: con.execute(
            "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [vendor, kind, key, start, end, dt.datetime.now(), n, payload]))

    def get(self, vendor: str, kind: str, key: str, start: dt.date | None = None,
            end: dt.date | None = None, *, covering: bool = True,
            max_age: dt.timedelta | None = None) -> str | None:
        sql = "SELECT payload FROM entries WHERE vendor=? AND kind=? AND key=? AND n > 0"
        args: list[Any] = [vendor, kind, key]
        if start is not None and end is not None:
            if covering:
                sql += " AND start_day <= ? AND end_day >= ?"
                args += [start, end]
            else:  # any overlap: the offline fallback
                sql += " AND start_day <= ? AND end_day >= ?"
                args += [end, start]
        if max_age is not None:
            sql += " AND fetched_at >= ?"
            args.append(dt.datetime.now() - max_age)
        sql += " ORDER BY fetched_at DESC LIMIT 1"
        row = self._run(lambda con: con.execute(sql, args).fetchone())
        return row[0] if row else None


def _encode(kind: str, value: Any) -> tuple[int, str]:
    if kind == "prices":
        frame = value.reset_index()
        frame["date"] = frame["date"].dt.strftime("%Y-%m-%d")
        return len(frame), json.dumps(frame.to_dict("records"))
    if kind in _RECORDS:
        return len(value), json.dumps([r.model_dump(mode="json") for r in value])
    if kind == "fundamentals":
        return len(value.values), value.model_dump_json()
    return len(value or {}), json.dumps(value)


def _decode(kind: str, payload: str) -> Any:
    data = json.loads(payload)
    if kind == "prices":
        import pandas as pd
        return normalize_bars(pd.DataFrame(data))
    if kind in _RECORDS:
        return [_RECORDS[kind].model_validate(r) for r in data]
    if kind == "fundamentals":
        return Fundamentals.model_validate(data)
    return data


class CachedVendor:
    """Wraps a remote vendor; exposes exactly the capabilities the vendor has."""

    def __init__(self, inner: Any, cache: Cache):
        self.inner, self.cache, self.name = inner, cache, inner.name

    def __getattr__(self, capability: str):
        fn = getattr(self.inner, capability)  # AttributeError: vendor lacks it, router skips
        if capability not in ("prices", "news", "global_news", "identity", "fundamentals",
                              "statement", "insider"):
            return fn
        return functools.partial(self._call, capability, fn)

    def _call(self, kind: str, fn: Callable, *args: Any) -> Any:
        if kind in ("prices", "news"):
            symbol, start, end = args
            key = symbol
            today = dt.date.today()
            covered_end = min(end, today - dt.timedelta(days=1)) if end >= today else end
        elif kind == "global_news":
            start, end, limit = args
            key, covered_end = f"limit={limit}", end
        else:
            key, start, end, covered_end = "|".join(str(a) for a in args[:3]
                                                    if not isinstance(a, dt.date)), None, None, None
        ranged = start is not None
        hit = self.cache.get(self.name, kind, key, start, covered_end if ranged else None,
                             max_age=None if ranged else _TTL)
        if hit is not None:
            return self._narrow(kind, _decode(kind, hit), start, end)
        try:
            value = fn(*args)
        except (NoData, NotConfigured):
            raise
        except Exception:
            stale = self.cache.get(self.name, kind, key, start, end, covering=False)
            if stale is None:
                raise
            log.info("serving cached data after vendor failure", vendor=self.name, kind=kind,
                     key=key)
            value = self._narrow(kind, _decode(kind, stale), start, end)
            if kind == "prices" and value.empty:
                raise
            return value
        n, payload = _encode(kind, value)
        self.cache.put(self.name, kind, key, start, covered_end, n, payload)
        return value

    @staticmethod
    def _narrow(kind: str, value: Any, start: dt.date | None, end: dt.date | None) -> Any:
        if kind == "prices" and start is not None:
            return between(value, start, end)
        return value
