"""Reddit vendor: keyless search of a few investing subreddits.

Why two routes: the JSON search endpoint is often refused to anonymous clients, while the
Atom feed of the same search usually still answers; either way a failure must end as an
explicit "unavailable", never an exception that stops a run. The feed carries a post's body
as escaped HTML in ``<content>`` (followed by Reddit's "submitted by ... [link] [comments]"
footer): it is kept as plain text, so a post reads the same whichever route answered."""
from __future__ import annotations

import datetime as dt
import html
import re
from typing import Any
from urllib.parse import quote

from ..model import NoData, Post
from .base import Vendor

SUBREDDITS = ("wallstreetbets", "stocks", "investing")
PER_SUB = 5
HEADERS = {"User-Agent": "ta-actors/0.1 (research; keyless)"}
_ATOM = "{http://www.w3.org/2005/Atom}"
_TAG = re.compile(r"<[^>]+>")
_FOOTER = re.compile(r"\s*submitted by\s+/u/\S+.*$", re.DOTALL | re.IGNORECASE)


def body_text(content: str | None) -> str:
    """The plain text of an Atom entry's HTML ``<content>``, without Reddit's footer."""
    text = html.unescape(_TAG.sub(" ", content or ""))  # ElementTree unescaped it once
    return _FOOTER.sub("", " ".join(text.split())).strip()


def _post_text(title: str, body: str) -> str:
    return (title + " - " + body).strip(" -")[:600]


class RedditVendor(Vendor):
    name = "reddit"
    remote = True

    def __init__(self, session: Any = None, timeout: float = 15):
        self.session, self.timeout = session, timeout

    def _http(self):
        import requests
        return self.session or requests

    def _json(self, sub: str, symbol: str) -> list[Post]:
        url = (f"https://www.reddit.com/r/{sub}/search.json?q={quote(symbol)}&restrict_sr=1"
               f"&sort=new&limit={PER_SUB}&t=month")
        resp = self._http().get(url, headers=HEADERS, timeout=self.timeout)
        resp.raise_for_status()
        children = resp.json()["data"]["children"]
        return [Post(created=dt.datetime.fromtimestamp(c["data"]["created_utc"], dt.timezone.utc),
                     source=f"reddit r/{sub}", author=c["data"].get("author"),
                     text=_post_text(c["data"].get("title", ""), c["data"].get("selftext", "")),
                     score=c["data"].get("score"))
                for c in children[:PER_SUB]]

    def _atom(self, sub: str, symbol: str) -> list[Post]:
        import xml.etree.ElementTree as ET
        url = (f"https://www.reddit.com/r/{sub}/search.rss?q={quote(symbol)}&restrict_sr=1"
               f"&sort=new&limit={PER_SUB}&t=month")
        resp = self._http().get(url, headers=HEADERS, timeout=self.timeout)
        resp.raise_for_status()
        posts = []
        for entry in ET.fromstring(resp.content).iter(f"{_ATOM}entry"):
            stamp = entry.findtext(f"{_ATOM}published") or entry.findtext(f"{_ATOM}updated")
            if not stamp:
                continue
            posts.append(Post(created=dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")),
                              source=f"reddit r/{sub}",
                              author=entry.findtext(f"{_ATOM}author/{_ATOM}name"),
                              text=_post_text(entry.findtext(f"{_ATOM}title") or "",
                                              body_text(entry.findtext(f"{_ATOM}content")))))
        return posts[:PER_SUB]

    def social(self, symbol: str, start: dt.date, end: dt.date) -> list[Post]:
        posts, failures = [], []
        for sub in SUBREDDITS:
            for route in (self._json, self._atom):
                try:
                    posts += route(sub, symbol)
                    break
                except Exception as exc:
                    failures.append(f"r/{sub} {route.__name__[1:]}: {type(exc).__name__}")
        if not posts and len(failures) == 2 * len(SUBREDDITS):
            raise RuntimeError("reddit unavailable: " + ", ".join(failures))
        if not posts:
            raise NoData(f"no reddit posts mention {symbol}")
        return posts
