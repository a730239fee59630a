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
from typing import Annotated, Any, NoReturn, Optional

import click
import typer
from rich.markup import escape

from cli import display
from events.errors import InvalidInput, StoreError, one_line
from events.settings import setting

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

app = typer.Typer(help="Multi-agent LLM trading research on Ray actors and an event store.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
memory_app = typer.Typer(help="The memory log: past decisions, outcomes and lessons.",
                         no_args_is_help=True)
app.add_typer(memory_app, name="memory")

StoreOpt = Annotated[Optional[Path], typer.Option(
    "--store", help="Event store file (default: env TA_ACTORS_STORE, else the user data dir).")]
AddressOpt = Annotated[Optional[str], typer.Option(
    "--address", help="Join a running Ray cluster ('auto' on a cluster node).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead.")]


def default_store() -> Path:
    return setting("TA_ACTORS_STORE")


def check_out_dir(out: Path | None) -> None:
    """--out must be a folder we can write into (or one we can create): checked before
    anything starts, so a run never ends unable to write its reports."""
    if out is None:
        return
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise InvalidInput(f"--out {out} is a file, not a folder")
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise InvalidInput(f"--out {out}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InvalidInput(f"--out {out}: folder {probe} is not writable")


#: Exit codes: 1 a run that did not complete, or a bug; 2 bad input (flags, files, store).
EXIT_FAILED, EXIT_BAD_INPUT = 1, 2
_OPTIONS = {"debug": False}


@app.callback()
def _global_options(debug: Annotated[bool, typer.Option(
        "--debug", help="Show the traceback of an unexpected error.")] = False) -> None:
    _OPTIONS["debug"] = debug


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr, printed as is (never read as rich markup or emoji), then exit."""
    display.err.print(f"[bold red]error:[/] {escape(one_line(message, 2000))}", soft_wrap=True)
    raise typer.Exit(code)


def _guard(fn: Callable) -> Callable:
    """Bad input ends in one line on stderr and exit code 2; anything else is a bug: one line
    and exit code 1, the traceback with --debug. Ray's notices stay off stdout."""
    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            with contextlib.redirect_stdout(_QuietRay(sys.stdout)):
                return fn(*args, **kwargs)
        except (InvalidInput, StoreError) as exc:
            fail(one_line(exc))
        except (typer.Exit, typer.Abort, click.exceptions.ClickException):
            raise
        except Exception as exc:
            if _OPTIONS["debug"]:
                display.err.print_exception()
            hint = "" if _OPTIONS["debug"] else " (run with --debug for the traceback)"
            fail(f"{type(exc).__name__}: {one_line(exc)}{hint}", EXIT_FAILED)
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

    def fileno(self) -> int:  # rich redirects a broken pipe (`… | head`) through it
        return self.target.fileno()
