"""Shared fixtures: where the real market data lives, and one Ray for the whole session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TA_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data: real OHLCV, recorded Yahoo responses, identity tables (read-only)."""
    if not (SHARED_DATA / "ohlcv").is_dir():
        pytest.fail(f"real market data not found at {SHARED_DATA} (set TA_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def ohlcv_dir(shared_data: Path) -> Path:
    return shared_data / "ohlcv"
