"""Vendor rate limits: one token bucket per vendor, shared by every caller."""
from __future__ import annotations

import datetime as dt

import pytest

from data.limits import Buckets, Rate, ThrottledVendor, TokenBucket
from data.vendors.synthetic import SyntheticVendor


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_its_burst_then_spaces_calls_at_its_rate():
    clock = Clock()
    bucket = TokenBucket(Rate(per_s=2.0, burst=3), clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0.5, 1.0, 1.5])
    clock.now += 10  # a quiet spell refills up to the burst, never beyond
    assert [bucket.reserve() for _ in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.5])


def test_replicas_sharing_buckets_get_the_vendor_rate_between_them_not_each():
    clock = Clock()
    shared = Buckets({"yfinance": Rate(per_s=1.0, burst=1)}, clock)
    waits = [shared.reserve("yfinance") for _ in range(6)]  # two replicas, three calls each
    assert max(waits) == pytest.approx(5.0)  # six calls at one a second, whoever makes them
    assert shared.reserve("local") == 0.0  # local vendors are not limited


def test_a_throttled_vendor_waits_before_every_data_call():
    seen: list[str] = []
    vendor = ThrottledVendor(SyntheticVendor(), seen.append)
    bars = vendor.prices("NVDA", dt.date(2024, 5, 1), dt.date(2024, 5, 10))
    vendor.insider("NVDA")
    assert not bars.empty and seen == ["synthetic", "synthetic"] and vendor.name == "synthetic"


def test_past_windows_are_answered_once_per_replica_and_today_is_always_fetched():
    from data.service import MarketData
    from data.snapshot import history_start
    md = MarketData(vendors={"prices": ("synthetic",), "indicators": ("synthetic",)})
    day = dt.date(2024, 5, 10)
    first = md.bars("NVDA", history_start(day), day)
    assert md.bars("NVDA", history_start(day), day) is first  # kept: a past window is fixed
    rsi = md.indicator("NVDA", history_start(day), day, "rsi", first.value, vendor=first.vendor)
    assert md.indicator("NVDA", history_start(day), day, "rsi", first.value,
                        vendor=first.vendor) is rsi
    snapshot = md.snapshot("NVDA", day)
    assert snapshot.indicators["rsi"] == round(float(rsi.iloc[-1]), 6)  # shared, same value
    today = dt.date.today()
    assert md.bars("NVDA", history_start(today), today) is not md.bars(
        "NVDA", history_start(today), today)  # today's window may still change
