"""`ta-actors verify` on a store file: one line per problem, exit 1 when broken, the JSON shape,
incremental checks, and the exported head anchor (--anchor / --against)."""
from __future__ import annotations

import json

import duckdb
import pytest
from typer.testing import CliRunner

from events.domain import TurnAssigned
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent

from test_store_contract import TEST_KEY  # noqa: E402 - tests/ is on sys.path under pytest


@pytest.fixture(autouse=True)
def chain_key(monkeypatch):
    monkeypatch.setenv("TA_ACTORS_CHAIN_KEY", TEST_KEY.decode())


@pytest.fixture
def filled(tmp_path):
    path = tmp_path / "events.duckdb"
    with DuckDBEventStore(path) as store:
        for batch in range(3):
            for stream in ("run-a", "run-b"):
                store.append(stream, [NewEvent(TurnAssigned(turn_id=f"{stream}-{batch}-{i}",
                                                            role="bull"), actor="test")
                                      for i in range(2)])
    return path


def verify(*args):
    from cli.app import app
    return CliRunner().invoke(app, ["verify", *map(str, args)])


def sql(path, statement: str) -> None:
    con = duckdb.connect(str(path))
    try:
        con.execute(statement)
    finally:
        con.close()


def test_verify_json_keeps_its_shape_and_adds_fields(filled):
    result = verify("--store", filled, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["ok"], report["streams"], report["events"], report["problems"]) == \
        (True, 2, 12, [])
    assert report["anchor"] == "ok" and report["checkpoint"] == 12
    assert report["incremental"] is False


def test_verify_prints_one_line_per_problem_and_exits_1(filled):
    sql(filled, "UPDATE events SET actor = 'mallory' WHERE stream = 'run-a' AND seq = 2")
    sql(filled, "DELETE FROM events WHERE position = (SELECT max(position) FROM events)")
    result = verify("--store", filled)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("run-a: event seq 2 (TurnAssigned) was altered")
    assert lines[1].startswith("(anchor): the anchor records events up to position 12")
    assert result.stdout.strip() == "2 streams, 11 events: 2 problem(s)"


def test_incremental_verify_starts_after_the_last_checkpoint(filled):
    assert verify("--store", filled).exit_code == 0
    with DuckDBEventStore(filled) as store:
        store.append("run-c", [NewEvent(TurnAssigned(turn_id="c", role="bear"), actor="t")])
    result = verify("--store", filled, "--incremental", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["ok"]
    assert (report["incremental"], report["from_position"], report["events"]) == (True, 12, 1)
    result = verify("--store", filled, "--incremental")
    assert result.stdout.strip() == "0 streams, 0 events after position 13: intact"


def test_exported_anchor_detects_a_cut_even_without_the_file_beside_the_store(filled, tmp_path):
    exported = tmp_path / "elsewhere" / "head.json"
    exported.parent.mkdir()
    result = verify("--store", filled, "--anchor", exported)
    assert result.exit_code == 0 and f"signed head exported to {exported}" in result.stdout
    head = json.loads(exported.read_text())
    assert (head["position"], head["count"]) == (12, 12) and len(head["signature"]) == 64
    assert verify("--store", filled, "--against", exported).exit_code == 0

    sql(filled, "DELETE FROM events WHERE position >= 11")
    (filled.parent / (filled.name + ".anchor")).unlink()
    result = verify("--store", filled, "--against", exported)
    assert result.exit_code == 1
    assert "(exported anchor): the anchor records events up to position 12, but the store " \
           "ends at 10: its newest events were removed" in result.stderr
    bad = tmp_path / "not-an-anchor.json"
    bad.write_text("[1, 2]")
    result = verify("--store", filled, "--against", bad)
    assert result.exit_code != 0 and "cannot read the anchor" in result.output


def test_verify_with_the_wrong_key_says_so_in_one_line(filled, monkeypatch):
    monkeypatch.setenv("TA_ACTORS_CHAIN_KEY", "some other key entirely")
    result = verify("--store", filled)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "(chain key): chain key does not match this store (set TA_ACTORS_CHAIN_KEY or the key "
        "file used when it was written)"]
