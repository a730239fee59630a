"""Real processes against one DuckDB file: a writer killed mid-append must leave whole batches
and intact chains behind (and keep all it acknowledged), and a second process must be told
clearly that the file is taken."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from events.domain import TurnAssigned
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent
from events.store import StoreLockedError

REPO = Path(__file__).resolve().parents[1]
BATCH = 5

WRITER = textwrap.dedent("""
    import sys
    from events.domain import TurnAssigned
    from events.duckdb_store import DuckDBEventStore
    from events.envelope import NewEvent
    from events.store import AppendRequest

    store = DuckDBEventStore(sys.argv[1])
    streams = [f"run-{i:02d}" for i in range(40)]
    print("ready", flush=True)

    def batch(stream, k):  # every event says which batch it is and "i of 5"
        return [NewEvent(TurnAssigned(turn_id=f"{stream}/b{k}/{i}of5", role="bull", round=i),
                         actor="writer") for i in range(1, 6)]

    k = 0
    while True:
        k += 1
        for n, stream in enumerate(streams):
            if n % 4 == 0:  # a group commit of two streams, then two single appends
                group = streams[n:n + 2]
                results = store.append_batches([AppendRequest(s, batch(s, k)) for s in group])
                for s, r in zip(group, results):
                    print(s, r[-1].seq, flush=True)
            elif n % 4 == 1:
                continue
            else:
                print(stream, store.append(stream, batch(stream, k))[-1].seq, flush=True)
""")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _wait_for_line(proc: subprocess.Popen, expected: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    line = proc.stdout.readline()
    while line.strip() != expected:
        if not line and proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"child did not say {expected!r}: {proc.stderr.read()}")
        line = proc.stdout.readline()


def test_sigkilled_writer_leaves_whole_batches_and_intact_chains(tmp_path):
    path = tmp_path / "killed.duckdb"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for_line(proc, "ready")
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err

    acknowledged: dict[str, int] = {}
    for stream, seq in re.findall(r"^(run-\d\d) (\d+)$", out, re.MULTILINE):
        acknowledged[stream] = max(acknowledged.get(stream, 0), int(seq))
    assert sum(acknowledged.values()) >= 100, "the writer barely wrote; the test proves nothing"

    with DuckDBEventStore(path) as store:
        infos = store.list_streams()
        assert len(infos) >= 2
        for info in infos:
            result = store.verify(info.stream)
            assert result.ok, result.problem
            events = store.read_stream(info.stream)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            assert len(events) % BATCH == 0, f"{info.stream} has a half batch"
            for e in events:  # every batch whole and in order: b<k>/<i>of5 at seq 5(k-1)+i
                k, i = divmod(e.seq - 1, BATCH)
                assert e.payload.turn_id == f"{info.stream}/b{k + 1}/{i + 1}of5"
            assert len(events) >= acknowledged.get(info.stream, 0), "lost an acknowledged batch"
        assert set(acknowledged) <= {i.stream for i in infos}
        positions = [e.position for e in store.read_all()]
        assert len(positions) == len(set(positions)) == sum(i.version for i in infos)
        assert positions == sorted(positions)

        stream, before = infos[0].stream, store.last_position()
        (after,) = store.append(stream, [NewEvent(TurnAssigned(turn_id="after", role="bull"),
                                                  actor="test")])
        assert (after.seq, after.position) == (infos[0].version + 1, before + 1)
        assert store.verify(stream).ok


HOLDER = textwrap.dedent("""
    import sys, time
    from events.duckdb_store import DuckDBEventStore
    store = DuckDBEventStore(sys.argv[1])
    print("ready", flush=True)
    time.sleep(60)
""")


def test_file_held_by_another_process_gives_store_locked_error(tmp_path):
    path = tmp_path / "held.duckdb"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_line(proc, "ready")
        for read_only in (False, True):
            with pytest.raises(StoreLockedError) as err:
                DuckDBEventStore(path, read_only=read_only)
            assert str(path) in str(err.value)
            assert "in use by another process" in str(err.value)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    with DuckDBEventStore(path) as store:  # the lock goes with the process
        assert store.version("anything") == 0
    con = duckdb.connect(str(path))
    assert con.execute("SELECT count(*) FROM events").fetchone() == (0,)
    con.close()
