"""A real small model for the real-model test and benchmark: llama.cpp's server with
SmolLM2-135M, started by ``../shared/tools/local_llm/start.sh`` (read its README.txt).

``start()`` runs the script on a free port of 127.0.0.1, in a state folder of its own (the
installed venv and model of the default folder are linked in when present, so nothing is
installed twice and another user's ``stop.sh`` cannot stop this server), and returns the
server; ``stop()`` ends it only if ``start()`` started it. Where the server cannot start
on this machine (a CPU without AVX2: the script exits 4) ``Unavailable`` carries the
one-line reason to skip with; any other failure is an error, never a skip.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOLS = Path(os.environ.get("TA_SHARED_TOOLS", REPO.parent / "shared" / "tools")) / "local_llm"
DEFAULT_STATE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "local_llm"
MODEL = "openai/smollm2-135m"
#: start.sh's exit code for "this CPU cannot run the server" (no AVX2)
CANNOT_RUN = 4


class Unavailable(RuntimeError):
    """The server cannot run on this machine (one line: why)."""


@dataclass(frozen=True)
class LocalServer:
    url: str  # OpenAI-compatible base URL, e.g. http://127.0.0.1:PORT/v1
    model: str  # litellm model id
    pid: int | None  # the process start() started; None when it was running already
    state_dir: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _state_dir() -> Path:
    """A folder of our own for start.sh (pid file, log, launcher), reusing the default
    folder's installed venv and model when there are any."""
    folder = Path(tempfile.mkdtemp(prefix="ta-local-llm-"))
    for name in ("venv", "models"):
        if (DEFAULT_STATE / name).exists():
            (folder / name).symlink_to(DEFAULT_STATE / name)
    return folder


def start(timeout_s: float = 600.0) -> LocalServer:
    script = TOOLS / "start.sh"
    if not script.is_file():
        raise FileNotFoundError(f"{script} not found (set TA_SHARED_TOOLS)")
    state = _state_dir()
    env = dict(os.environ, LOCAL_LLM_PORT=str(_free_port()), LOCAL_LLM_DIR=str(state))
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if done.returncode == CANNOT_RUN:
        raise Unavailable(done.stderr.strip().splitlines()[-1] if done.stderr.strip()
                          else "the local llama.cpp server cannot run on this CPU")
    found = re.search(r"PID=(\d+) PORT=(\d+) MODEL=(\S+) API_BASE=(\S+)", done.stdout)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"start.sh failed ({done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()[-600:]}")
    pid = None if "already running" in done.stdout else int(found.group(1))
    return LocalServer(url=found.group(4), model=f"openai/{found.group(3)}", pid=pid,
                       state_dir=state)


def stop(server: LocalServer) -> None:
    """End the server if ``start()`` started it (by its own PID, nothing else), then remove
    its state folder (the links to the shared venv and model are removed, not followed)."""
    if server.pid is None:
        return
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.kill(server.pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(server.pid, 0)
            time.sleep(0.1)
    shutil.rmtree(server.state_dir, ignore_errors=True)
