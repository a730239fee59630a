"""Shared fixtures: where the real market data lives, and one Ray for the whole session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# the store's chain key: a throwaway key file for this session (and the Ray workers it
# starts, which inherit the environment), never the user's own
os.environ.setdefault("TA_ACTORS_CHAIN_KEY_FILE", os.path.join(
    __import__("tempfile").mkdtemp(prefix="ta-chain-key-"), "chain.key"))

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


@pytest.fixture(scope="session")
def ray_team(tmp_path_factory):
    """One local Ray (2 CPUs) for the whole test session, with the shared actors started.

    Returns a function ``store_path -> Team`` giving the actors bound to that store file."""
    cache = tmp_path_factory.mktemp("market-cache") / "cache.duckdb"
    os.environ["TA_ACTORS_CACHE"] = str(cache)
    # Yahoo is replayed from real recorded responses, never the network. Set before Ray
    # starts: the market-data actor's process inherits the environment of that moment.
    os.environ.setdefault("TA_ACTORS_YAHOO_ARCHIVE", str(SHARED_DATA / "yahoo"))
    import ray

    from actors import runtime
    owned = runtime.start(num_cpus=2)
    yield runtime.team
    if owned:
        ray.shutdown()


@pytest.fixture
def store_path(tmp_path) -> Path:
    return tmp_path / "events.duckdb"


@pytest.fixture
def cli(ray_team):
    """Invoke `ta-actors` in-process (sharing the session's Ray); returns the click Result."""
    from typer.testing import CliRunner

    from cli.app import app
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    return invoke


# --- markers: `make test-fast` runs what needs neither Ray nor a network server -------------
#: Fixtures (anywhere in a test's fixture closure) that start Ray or a server.
RAY_FIXTURES = frozenset({"ray_team"})
SERVER_FIXTURES = frozenset({"server", "fake_openai"})
#: Modules whose tests start Ray themselves (a head process, a simulated cluster) say so in
#: their source with one of these.
RAY_SIGNS = ("--head", "cluster_utils", "fault_harness", "ray.init(", "runtime.start(")


def _starts_ray(module) -> bool:
    try:
        source = Path(module.__file__).read_text(encoding="utf-8")
    except (AttributeError, TypeError, OSError):
        return False
    return any(sign in source for sign in RAY_SIGNS)


def pytest_collection_modifyitems(config, items):
    modules: dict[str, bool] = {}
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        module = getattr(item, "module", None)
        key = getattr(module, "__name__", "")
        if key not in modules:
            modules[key] = _starts_ray(module)
        if names & RAY_FIXTURES or modules[key] or item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.ray)
        if names & SERVER_FIXTURES:
            item.add_marker(pytest.mark.server)
