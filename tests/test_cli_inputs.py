"""Bad input: one line on stderr, a non-zero exit, and nothing written."""
from __future__ import annotations

import datetime as dt

import pytest

FUTURE = str(dt.date.today() + dt.timedelta(days=3))

BAD_RUNS = [
    (["../../etc/x", "--date", "2024-05-10"], "ticker '../../etc/x' is not a valid symbol"),
    (["NV DA", "--date", "2024-05-10"], "is not a valid symbol"),
    (["..", "--date", "2024-05-10"], "is not a valid symbol"),
    (["NVDA", "--date", "2024-13-01"], "date '2024-13-01' is not a date"),
    (["NVDA", "--date", "yesterday"], "is not a date in YYYY-MM-DD form"),
    (["NVDA", "--date", FUTURE], "is in the future"),
    (["NVDA", "--date", "2024-05-10", "--analysts", "market,astrology"], "unknown analyst astrology"),
    (["NVDA", "--date", "2024-05-10", "--analysts", ""], "unknown analyst"),
    (["NVDA", "--date", "2024-05-10", "--debate-rounds", "0"], "invalid setting debate_rounds (--debate-rounds)"),
    (["NVDA", "--date", "2024-05-10", "--risk-rounds", "-1"], "invalid setting risk_rounds (--risk-rounds)"),
    (["NVDA", "--date", "2024-05-10", "--vendor", "bloomberg"], "unknown vendor 'bloomberg'"),
    (["NVDA", "--date", "2024-05-10", "--data-dir", "/nonexistent/prices"], "is not a folder"),
    (["NVDA", "NVDA", "--date", "2024-05-10"], "a ticker is repeated"),
    (["NVDA", "--date", "2024-05-10", "--max-tool-calls", "0"], "invalid setting max_tool_calls"),
    (["NVDA"], "give the trade date with --date YYYY-MM-DD"),
    (["--date", "2024-05-10"], "give at least one ticker"),
    (["--tickers-file", "/nonexistent/list.txt", "--date", "2024-05-10"],
     "cannot read tickers file /nonexistent/list.txt"),
]


@pytest.mark.parametrize("args,message", BAD_RUNS, ids=[m for _, m in BAD_RUNS])
def test_bad_run_input(cli, store_path, args, message):
    result = cli("run", *args, "--store", store_path)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not store_path.exists()  # nothing written, not even an empty store


@pytest.mark.parametrize("command", ["replay", "report", "resume"])
def test_unknown_run_id(cli, store_path, command, tmp_path):
    missing = cli(command, "NVDA-2024-05-10-deadbeef", "--store", store_path)
    assert missing.exit_code == 2 and "no event store at" in missing.stderr
    assert not store_path.exists()
    from events.duckdb_store import DuckDBEventStore
    DuckDBEventStore(store_path).close()  # an empty store: the run is still unknown
    result = cli(command, "NVDA-2024-05-10-deadbeef", "--store", store_path)
    assert result.exit_code == 2
    assert "no run 'NVDA-2024-05-10-deadbeef'" in result.stderr.strip().splitlines()[0]


def test_help_lists_every_command(cli):
    result = cli("--help")
    for name in ("run", "replay", "report", "resume", "runs", "memory"):
        assert f" {name} " in result.stdout


def test_workers_import_no_heavy_library(ray_team, store_path, cli):
    """Turn logic stays light: after a whole run, the worker processes that drove it and
    played every role have loaded none of litellm, pandas, duckdb, yfinance, pandas-ta."""
    import ray
    result = cli("run", "NVDA", "--date", "2024-05-10", "--offline", "--store", store_path,
                 "--json")
    assert result.exit_code == 0, result.output
    team = ray_team(store_path)
    workers = team.workers()
    heavy = ray.get([w.imported_heavy.remote() for w in workers])
    assert workers and heavy == [[]] * len(workers)


def test_run_on_a_store_another_process_holds(cli, store_path):
    """The store file is held by this (test) process: the store actor cannot open it, and the
    user gets one line naming the file, not a Ray traceback."""
    from events.duckdb_store import DuckDBEventStore
    with DuckDBEventStore(store_path):
        result = cli("run", "NVDA", "--date", "2024-05-10", "--offline", "--store", store_path)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"event store {store_path} is in use by another process" in line
    with DuckDBEventStore(store_path, read_only=True) as store:
        assert store.list_streams() == []  # nothing was written


def test_tickers_file_is_validated_like_the_command_line(cli, store_path, tmp_path):
    listing = tmp_path / "tickers.txt"
    listing.write_text("AAPL, MSFT\n../../etc/x  # sneaky\n")
    result = cli("run", "--tickers-file", listing, "--date", "2024-05-10", "--store", store_path)
    assert result.exit_code == 2 and "ticker '../../etc/x' is not a valid symbol" in result.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing here\n\n")
    result = cli("run", "--tickers-file", empty, "--date", "2024-05-10", "--store", store_path)
    assert result.exit_code == 2 and "lists no tickers" in result.stderr
    assert not store_path.exists()
