"""`ta-actors`: run the research team, and audit, report, resume and list runs."""
from __future__ import annotations

from cli import memory, reading, running  # noqa: F401 - importing registers the commands
from cli.common import app

__all__ = ["app", "main"]


def main() -> None:
    app()
