"""Yahoo archive: replay recorded Yahoo HTTP responses, for reproducible research and offline
tests.

A folder of recordings (one JSON file each: ``{"request_url", "status", "body", ...}``, the
format of ``../shared/data/yahoo``) becomes a ``requests`` transport adapter. Mounted on the
session yfinance uses, every Yahoo request is answered from the folder, or with a Yahoo-style
HTTP 404 ("not recorded", in the shape Yahoo uses for "nothing here" on that endpoint) that
the yfinance vendor turns into "no data". The adapter never opens a socket, so a run on the
archive is exactly repeatable and needs no network.

Enable it with ``TA_ACTORS_YAHOO_ARCHIVE=<folder>`` (read whenever the yfinance vendor builds
its session, i.e. in the market-data actor's process) or ``YFinanceVendor(archive=<folder>)``.

Matching: a request is answered by a recording of the same endpoint path (the host,
query1/query2, is ignored) whose identifying parameters agree (``q``, ``symbols``, ``symbol``
when the recording has them; for fundamentals time series, the frequency of the requested
types). Among several candidates wins the one overlapping the requested period most (charts),
then sharing the most requested types, then the most parameters. Recordings may cover other
dates than asked: the data layer filters everything to the trade date anyway. The cookie and
crumb handshake is answered without recordings (it carries no market data)."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from requests.adapters import BaseAdapter

from events.settings import spec

ARCHIVE_ENV = spec("TA_ACTORS_YAHOO_ARCHIVE").name  # the variable, from the settings table
_IDENTIFYING = ("q", "symbols", "symbol")
_FREQS = ("annual", "quarterly", "trailing")


@dataclass(frozen=True)
class Recording:
    file: Path
    path: str
    query: dict[str, list[str]]
    status: int


def _period(query: dict[str, list[str]]) -> tuple[int, int] | None:
    try:
        return int(query["period1"][0]), int(query["period2"][0])
    except (KeyError, ValueError, IndexError):
        return None


def _types(query: dict[str, list[str]]) -> set[str]:
    return {t for v in query.get("type", []) for t in v.split(",") if t}


def _freq(types: set[str]) -> str | None:
    found = {f for f in _FREQS for t in types if t.startswith(f)}
    return found.pop() if len(found) == 1 else None


class YahooArchive:
    """An index of recorded Yahoo responses, and the matching rule."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise FileNotFoundError(f"Yahoo archive {self.folder} is not a folder")
        self._by_path: dict[str, list[Recording]] = {}
        for file in sorted(self.folder.glob("*.json")):
            try:
                raw = json.loads(file.read_text(encoding="utf-8"))
                url = urlsplit(raw["request_url"])
            except (ValueError, KeyError, TypeError):
                continue  # not a recording
            rec = Recording(file, url.path.rstrip("/"), parse_qs(url.query),
                            int(raw.get("status") or 200))
            self._by_path.setdefault(rec.path, []).append(rec)
        self._bodies: dict[Path, bytes] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_path.values())

    def find(self, url: str) -> Recording | None:
        u = urlsplit(url)
        query = parse_qs(u.query)
        candidates = self._by_path.get(u.path.rstrip("/"), [])
        for key in _IDENTIFYING:
            if key in query:
                want = query[key][0].upper()
                candidates = [c for c in candidates if key not in c.query
                              or c.query[key][0].upper() == want]
        wanted_types = _types(query)
        if wanted_types:
            freq = _freq(wanted_types)
            candidates = [c for c in candidates if _freq(_types(c.query)) == freq]
        if not candidates:
            return None

        def score(c: Recording) -> tuple[int, int, int]:
            overlap = 0
            asked, have = _period(query), _period(c.query)
            if asked and have:
                overlap = max(0, min(asked[1], have[1]) - max(asked[0], have[0]))
            shared = sum(1 for k, v in query.items() if c.query.get(k) == v)
            return overlap, len(wanted_types & _types(c.query)), shared
        return max(candidates, key=score)

    def body(self, rec: Recording) -> bytes:
        with self._lock:
            if rec.file not in self._bodies:
                raw = json.loads(rec.file.read_text(encoding="utf-8"))
                body = raw.get("body")
                self._bodies[rec.file] = (body if isinstance(body, str)
                                          else json.dumps(body)).encode("utf-8")
            return self._bodies[rec.file]


class ArchiveAdapter(BaseAdapter):
    """A requests transport that answers from a YahooArchive; ``calls`` lists (url, status)."""

    def __init__(self, archive: YahooArchive | str | Path):
        super().__init__()
        self.archive = archive if isinstance(archive, YahooArchive) else YahooArchive(archive)
        self.calls: list[tuple[str, int]] = []

    def answer(self, url: str) -> tuple[int, bytes, dict[str, str]]:
        u = urlsplit(url)
        if u.netloc == "fc.yahoo.com":  # the cookie request: Yahoo answers 404 + a cookie
            return 404, b"", {"Set-Cookie": "A3=d=AQABBarchive; Domain=.yahoo.com; Path=/"}
        if u.path.endswith("/v1/test/getcrumb"):
            return 200, b"Arch1vedCrumb", {"Content-Type": "text/plain"}
        rec = self.archive.find(url)
        if rec is None:
            return 404, self._not_recorded(u.path), {"Content-Type": "application/json",
                                                     "X-Yahoo-Archive": "miss"}
        return rec.status, self.archive.body(rec), {"Content-Type": "application/json",
                                                    "X-Yahoo-Archive": rec.file.name}

    def _not_recorded(self, path: str) -> bytes:
        """HTTP 404 with the body Yahoo gives for "nothing here" on that endpoint, so yfinance
        parses it as no data. Fundamentals time series say "no rows" without an error, as
        Yahoo does (yfinance fetches a live trailing-PEG series along with every profile)."""
        if "/fundamentals-timeseries/" in path:
            return json.dumps({"timeseries": {"result": [], "error": None}}).encode()
        root = ("chart" if "/finance/chart/" in path else
                "quoteSummary" if "/finance/quoteSummary/" in path else "finance")
        return json.dumps({root: {"result": None, "error": {
            "code": "Not Found",
            "description": f"not recorded in the Yahoo archive {self.archive.folder}"}}}).encode()

    def send(self, request: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        from requests.models import Response
        status, body, headers = self.answer(request.url)
        self.calls.append((request.url, status))
        resp = Response()
        resp.status_code, resp._content, resp.url, resp.request = status, body, \
            request.url, request
        resp.headers.update(headers)
        resp.encoding = "utf-8"
        resp.reason = "OK" if status < 400 else "Not Found"
        return resp

    def close(self) -> None:
        """Nothing to release: the archive is read on each request."""


def archive_session(adapter: Any) -> Any:
    """A requests.Session whose every http(s) request goes to ``adapter`` (no network)."""
    import requests
    session = requests.Session()
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session
