"""The cluster path: a separate Ray head, `run --address`, and the store served by its
detached store actor to later commands (replay through the cluster while the file is held)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ta-actors"), *args], capture_output=True, text=True,
                          timeout=180, env=env)


def test_run_and_replay_through_a_cluster(tmp_path, ohlcv_dir):
    port = _free_port()
    short_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Unix socket paths must be short
    # the cluster's own auth token, shared by the head and the clients of this test only
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": os.urandom(16).hex()}
    head = subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", f"--temp-dir={short_dir}",
         "--node-ip-address=127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    address = f"127.0.0.1:{port}"
    store = tmp_path / "events.duckdb"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait for the head to accept drivers
            try:
                if subprocess.run([str(BIN / "ray"), "status", f"--address={address}"],
                                  capture_output=True, env=env, timeout=15).returncode == 0:
                    break
            except subprocess.TimeoutExpired:
                continue  # the head is not listening yet
            time.sleep(1)
        done = _cli(env, "run", "NVDA", "--date", "2024-05-10", "--data-dir", str(ohlcv_dir),
                    "--store", str(store), "--address", address, "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        (row,) = json.loads(done.stdout)
        assert row["status"] == "completed"
        # the cluster's store actor still holds the file: a direct open says what to do
        direct = _cli(env, "replay", row["run_id"], "--store", str(store))
        assert direct.returncode == 2 and "is in use by another process" in direct.stderr
        assert "--address" in direct.stderr
        audit = _cli(env, "replay", row["run_id"], "--store", str(store), "--address", address,
                     "--json")
        assert audit.returncode == 0, audit.stderr[-2000:]
        doc = json.loads(audit.stdout)
        assert doc["verified"] and doc["decision_matches"] and doc["rating"] == row["rating"]
        # read models through the store actor too
        listed = _cli(env, "runs", "--store", str(store), "--address", address, "--json")
        assert listed.returncode == 0, listed.stderr[-2000:]
        assert [r["run_id"] for r in json.loads(listed.stdout)] == [row["run_id"]]
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=60)
        shutil.rmtree(short_dir, ignore_errors=True)
