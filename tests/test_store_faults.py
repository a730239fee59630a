"""A full disk and a damaged file: one line that says what happened, and no half-made store.

The disk-full tests use a real 1 MB tmpfs when this process may mount one (root), and a
simulated failure at the DuckDB boundary otherwise (always run, so the mapping is tested)."""
from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import duckdb
import pytest

import events.duckdb_store as duckdb_store
from events.domain import TurnAssigned
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent
from events.store import StoreError

from test_store_contract import TEST_KEY  # noqa: E402 - tests/ is on sys.path under pytest


@pytest.fixture(autouse=True)
def chain_key(monkeypatch):
    monkeypatch.setenv("TA_ACTORS_CHAIN_KEY", TEST_KEY.decode())


def turns(n: int, size: int = 400) -> list[NewEvent]:
    return [NewEvent(TurnAssigned(turn_id=os.urandom(size // 2).hex(), role="bull"), actor="t")
            for _ in range(n)]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MB tmpfs, or skip when mounting is not allowed here."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill_up(folder, leave_kb: int = 0) -> None:
    """Take all space of the tmpfs but ``leave_kb``."""
    free_kb = shutil.disk_usage(folder).free // 1024
    with open(folder / f"ballast-{uuid.uuid4().hex}", "wb") as f:
        for _ in range(max(free_kb - leave_kb, 0)):
            try:
                f.write(b"\0" * 1024)
                f.flush()
            except OSError:
                break


# ---- disk full, for real -------------------------------------------------------------------
def test_creating_a_store_on_a_full_disk_says_so_and_leaves_no_file(tiny_disk):
    fill_up(tiny_disk)
    path = tiny_disk / "events.duckdb"
    with pytest.raises(StoreError) as err:
        DuckDBEventStore(path)
    assert str(err.value) == f"no space left on device: {path}"
    assert not path.exists() and not (tiny_disk / "events.duckdb.wal").exists()


def test_a_commit_on_a_full_disk_says_so_and_the_store_goes_on(tiny_disk):
    path = tiny_disk / "events.duckdb"
    store = DuckDBEventStore(path)
    store.append("a", turns(5))
    fill_up(tiny_disk, leave_kb=64)
    with pytest.raises(StoreError) as err:
        for _ in range(200):
            store.append("a", turns(20))
    assert str(err.value) == f"no space left on device: {path}"
    assert "rollback" not in str(err.value)
    acknowledged = store.version("a")
    for ballast in tiny_disk.glob("ballast-*"):
        ballast.unlink()
    (event,) = store.append("a", turns(1))
    assert event.seq == acknowledged + 1
    assert store.verify_all().ok
    store.close()


# ---- disk full, simulated at the DuckDB boundary -------------------------------------------
def test_simulated_full_disk_at_creation_removes_the_new_file(tmp_path, monkeypatch):
    real_connect = duckdb.connect

    def connect(path, read_only=False):
        con = real_connect(path, read_only=read_only)  # the file now exists
        con.close()
        raise duckdb.IOException(f'Could not write file "{path}": No space left on device')

    monkeypatch.setattr(duckdb_store.duckdb, "connect", connect)
    path = tmp_path / "events.duckdb"
    with pytest.raises(StoreError, match=f"^no space left on device: {path}$"):
        DuckDBEventStore(path)
    assert list(tmp_path.iterdir()) == []


class FullDisk:
    """A connection whose COMMIT fails for lack of space (and whose ROLLBACK then finds no
    transaction, as DuckDB's does)."""

    def __init__(self, con):
        self.con, self.failed = con, False

    def execute(self, sql, *args):
        if sql == "COMMIT":
            self.con.execute("ROLLBACK")
            self.failed = True
            raise duckdb.IOException("Could not write file: No space left on device")
        if sql == "ROLLBACK" and self.failed:
            raise duckdb.TransactionException("cannot rollback - no transaction is active")
        return self.con.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.con, name)


def test_simulated_full_disk_at_commit_says_so_not_cannot_rollback(tmp_path):
    path = tmp_path / "events.duckdb"
    store = DuckDBEventStore(path)
    store.append("a", turns(2))
    real = store._con
    store._con = FullDisk(real)
    with pytest.raises(StoreError) as err:
        store.append("a", turns(2))
    assert str(err.value) == f"no space left on device: {path}"
    store._con = real
    assert store.version("a") == 2
    assert [e.seq for e in store.append("a", turns(1))] == [3]
    assert store.verify_all().ok
    store.close()


# ---- damaged files -------------------------------------------------------------------------
@pytest.fixture
def written(tmp_path):
    path = tmp_path / "good.duckdb"
    with DuckDBEventStore(path) as store:
        for i in range(15):
            store.append(f"run-{i % 5}", turns(200, size=200))
    return path


@pytest.mark.parametrize("keep", [0, 100, 4096, 0.5])
@pytest.mark.parametrize("read_only", [True, False])
def test_a_truncated_store_is_one_line_store_error(written, tmp_path, keep, read_only):
    damaged = tmp_path / "damaged.duckdb"
    shutil.copy(written, damaged)
    size = int(written.stat().st_size * keep) if isinstance(keep, float) else keep
    os.truncate(damaged, size)
    with pytest.raises(StoreError) as err, DuckDBEventStore(damaged,
                                                            read_only=read_only) as store:
        store.verify_all()
        store.read_all()
    message = str(err.value)
    assert message.startswith(f"{damaged} is not a valid ta-actors event store (corrupt or "
                              "truncated): ")
    assert "\n" not in message
    assert damaged.exists()  # never remove a file we did not create


def test_a_duckdb_file_that_is_not_a_store_is_refused_read_only(tmp_path):
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    with pytest.raises(StoreError, match="is not a valid ta-actors event store .*no events table"):
        DuckDBEventStore(other, read_only=True)


def test_verify_command_on_a_truncated_store_is_one_line(written, tmp_path):
    from typer.testing import CliRunner

    from cli.app import app
    os.truncate(written, 100)
    result = CliRunner().invoke(app, ["verify", "--store", str(written)])
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a valid ta-actors event store (corrupt or truncated)" \
        in lines[0]


@pytest.mark.parametrize("command", [("runs",), ("stats",), ("memory", "show")])
def test_read_model_commands_on_a_truncated_store_say_so(written, tmp_path, command):
    """runs, stats and memory show read the read models; a damaged file is one line and a
    non-zero exit there too, never an answer that looks fine."""
    from typer.testing import CliRunner

    from cli.app import app
    damaged = tmp_path / "damaged.duckdb"
    shutil.copy(written, damaged)
    assert CliRunner().invoke(app, ["runs", "--store", str(damaged)]).exit_code == 0
    os.truncate(damaged, damaged.stat().st_size // 2)  # a store in use, then cut
    result = CliRunner().invoke(app, [*command, "--store", str(damaged)])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "is not a valid ta-actors event store (corrupt or truncated)" in line
    assert "\n" not in line
