"""Where the chain key comes from: the environment, else a key file created once, privately and
atomically; readers never create one."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from events.chain import (KEY_ENV, KEY_FILE_ENV, ChainKeyError, default_key_file, key_id,
                          load_chain_key)
from events.domain import TurnAssigned
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def key_file(tmp_path, monkeypatch):
    path = tmp_path / "config" / "ta-actors" / "chain.key"
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(KEY_FILE_ENV, str(path))
    return path


def test_env_key_is_hex_or_text(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "00ff" * 16)
    assert load_chain_key() == bytes.fromhex("00ff" * 16)
    monkeypatch.setenv(KEY_ENV, "correct horse battery staple")
    assert load_chain_key() == b"correct horse battery staple"


def test_key_file_is_created_once_private_and_whole(key_file):
    assert default_key_file() == key_file
    key = load_chain_key()
    assert len(key) == 32
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_text().strip() == key.hex()
    assert load_chain_key() == key  # read, not made again
    assert [p.name for p in key_file.parent.iterdir()] == ["chain.key"]  # no temp file left


def test_readers_never_create_a_key(key_file):
    with pytest.raises(ChainKeyError) as err:
        load_chain_key(create=False)
    assert str(key_file) in str(err.value) and KEY_ENV in str(err.value)
    assert not key_file.exists()


def test_processes_racing_to_create_the_key_all_get_the_same_one(key_file):
    code = "from events.chain import load_chain_key; print(load_chain_key().hex())"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                              stdout=subprocess.PIPE) for _ in range(4)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(keys) == 1 and keys == {key_file.read_text().strip()}


def test_a_store_without_an_explicit_key_uses_the_key_file(key_file, tmp_path):
    path = tmp_path / "events.duckdb"
    with DuckDBEventStore(path) as store:
        store.append("a", [NewEvent(TurnAssigned(turn_id="t", role="bull"), actor="x")])
    assert key_file.exists()
    with DuckDBEventStore(path, read_only=True) as store:
        assert store.verify_all().ok
        assert store.head_anchor()["key_id"] == key_id(load_chain_key(create=False))
