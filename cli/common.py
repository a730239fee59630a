"""What every command shares: the typer app, common options, one-line errors, quiet stdout."""
from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli import display
from events.config import InvalidInput
from events.store import StoreError

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

app = typer.Typer(help="Multi-agent LLM trading research on Ray actors and an event store.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
memory_app = typer.Typer(help="The memory log: past decisions, outcomes and lessons.",
                         no_args_is_help=True)
app.add_typer(memory_app, name="memory")

StoreOpt = Annotated[Optional[Path], typer.Option(
    "--store", help="Event store file [default: env TA_ACTORS_STORE, else the user data dir].")]
AddressOpt = Annotated[Optional[str], typer.Option(
    "--address", help="Join a running Ray cluster ('auto' on a cluster node).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead.")]


def fail(message: str, code: int = 2) -> None:
    display.err.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


def _guard(fn: Callable) -> Callable:
    """Bad input ends in one line on stderr and exit code 2; Ray's notices stay off stdout."""
    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            with contextlib.redirect_stdout(_QuietRay(sys.stdout)):
                return fn(*args, **kwargs)
        except (InvalidInput, StoreError) as exc:
            fail(str(exc).splitlines()[0])
    return guarded


def command(fn: Callable) -> Callable:
    """Register a top-level command."""
    return app.command()(_guard(fn))


def memory_command(name: str) -> Callable:
    """Register a ``memory`` sub-command."""
    return lambda fn: memory_app.command(name)(_guard(fn))


class _QuietRay(io.TextIOBase):
    """stdout while Ray runs: Ray's background thread prints raylet notices to stdout, which
    would corrupt --json output; they go to stderr, minus the worker-pool noise."""

    NOISE = ("worker processes have been started", "ray-project/ray/issues/3644")

    def __init__(self, target: Any):
        self.target = target

    def write(self, text: str) -> int:
        if threading.current_thread() is threading.main_thread():
            return self.target.write(text)
        if not any(n in text for n in self.NOISE):
            sys.stderr.write(text)
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return self.target.isatty()
