"""Vendor rate limits that hold across every market-data replica of a cluster.

Each remote vendor has a rate (a token bucket: ``per_s`` tokens a second, at most
``burst`` saved up). Replicas do not keep their own buckets — N replicas would then make N
times the calls a vendor allows — they *reserve* a token from one shared ``Buckets`` (in a
small limiter actor on a cluster) and wait the delay it hands back before calling. Only
cache misses reach a vendor, so only they spend tokens.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Rate:
    per_s: float
    burst: int


#: Calls per second each remote vendor accepts (free tiers; local vendors are unlimited).
VENDOR_RATES: dict[str, Rate] = {
    "yfinance": Rate(per_s=2.0, burst=4),
    "alpha_vantage": Rate(per_s=5 / 60, burst=5),  # 5 a minute on a free key
    "reddit": Rate(per_s=1.0, burst=2),
    "stocktwits": Rate(per_s=1.0, burst=2),
    "fred": Rate(per_s=2.0, burst=5),  # FRED allows 120 requests a minute per key
    "polymarket": Rate(per_s=2.0, burst=5),  # far below Polymarket's public API limits
}


class TokenBucket:
    def __init__(self, rate: Rate, clock: Callable[[], float] = time.monotonic):
        self.rate, self._clock = rate, clock
        self._tokens, self._at = float(rate.burst), clock()

    def reserve(self) -> float:
        """Take one token now (possibly going into debt); the seconds to wait before using it."""
        now = self._clock()
        self._tokens = min(self.rate.burst, self._tokens + (now - self._at) * self.rate.per_s)
        self._at = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate.per_s


class Buckets:
    """One bucket per vendor, safe across threads."""

    def __init__(self, rates: dict[str, Rate] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._buckets = {v: TokenBucket(r, clock) for v, r in (rates or VENDOR_RATES).items()}
        self._lock = threading.Lock()

    def reserve(self, vendor: str) -> float:
        bucket = self._buckets.get(vendor)
        if bucket is None:
            return 0.0
        with self._lock:
            return bucket.reserve()


Throttle = Callable[[str], None]


def local_throttle(buckets: Buckets | None = None) -> Throttle:
    """A throttle for one process (tests, single-process use)."""
    shared = buckets or Buckets()
    return lambda vendor: time.sleep(shared.reserve(vendor))


class ThrottledVendor:
    """A vendor whose every data call first waits for its rate's token."""

    def __init__(self, vendor: Any, throttle: Throttle):
        self._vendor, self._throttle = vendor, throttle
        self.name = vendor.name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._vendor, attr)
        if not callable(value) or attr.startswith("_"):
            return value

        def throttled(*args: Any, **kwargs: Any) -> Any:
            self._throttle(self.name)
            return value(*args, **kwargs)
        return throttled
