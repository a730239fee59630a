"""`ta-actors memory export`: the memory log as a markdown file, from the memory read model."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cli.common import AddressOpt, StoreOpt, fail, memory_command


@memory_command("export")
def memory_export(
    file: Annotated[Path, typer.Argument(help="Markdown file to write, e.g. memory.md.")],
    ticker: Annotated[Optional[str], typer.Option(help="Only this ticker.")] = None,
    store: StoreOpt = None, address: AddressOpt = None,
) -> None:
    """Write the memory log (decisions, outcomes, lessons) as one markdown file."""
    from cli import reading  # its read-model query, and the default store it uses
    from events.config import validate_ticker
    from projections.memory import render_markdown
    from projections.views import entries_from_rows
    if file.is_dir() or not file.expanduser().parent.is_dir():
        fail(f"cannot write {file}: give a file in an existing folder")
    store = store or reading.default_store()
    if ticker:
        symbol = validate_ticker(ticker)
        rows = reading._query(store, address, "memory_of_ticker", {"ticker": symbol})
    else:
        rows = reading._query(store, address, "memory")
    entries = entries_from_rows(rows)
    text = render_markdown(entries, title=f"Memory log{f' of {symbol}' if ticker else ''}")
    target = file.expanduser()
    tmp = target.with_name(f".{target.name}.tmp")
    try:  # whole file or nothing
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        fail(f"cannot write {file}: {exc.strerror or exc}")
    typer.echo(f"wrote {len(entries)} decisions to {file}")
