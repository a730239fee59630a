"""Reading a store from the CLI: the file directly when no run holds it, else through the
cluster's store actor (``--address``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from events.errors import InvalidInput, StoreError


def open_reader(store: Path, address: str | None) -> Any:
    if address:
        from actors.session import ActorReader
        return ActorReader(store, address)
    from events.duckdb_store import DuckDBEventStore
    if not store.exists():
        raise InvalidInput(f"no event store at {store} (run something first, or pass --store)")
    try:
        return DuckDBEventStore(store, read_only=True)
    except StoreError as exc:
        raise InvalidInput(str(exc)) from None


def read_run(reader: Any, run_id: str, store: Path) -> list:
    events = reader.read_stream(run_id)
    if not events or events[0].type != "RunRequested":
        raise InvalidInput(f"no run {run_id!r} in {store} (see `ta-actors runs`)")
    return events


def load_run(store: Path, address: str | None, run_id: str) -> list:
    """A run's events, read and released (one line of error if there is no such run)."""
    reader = open_reader(store, address)
    try:
        return read_run(reader, run_id, store)
    finally:
        reader.close()


class BrokenHistory(Exception):
    """A run whose stored events fail their hash chain: nothing may be built on top."""


def load_verified_run(store: Path, address: str | None, run_id: str) -> list:
    """A run's events after checking its hash chain, for commands that continue a run
    (resume, fork): on a broken chain they would seal an altered history for good."""
    reader = open_reader(store, address)
    try:
        result = reader.verify(run_id)  # before decoding: an edit may not even parse
        if not result.ok:
            raise BrokenHistory(f"run {run_id} fails its hash chain ({result.problem}); "
                                "refusing to continue it (see `ta-actors verify`)")
        return read_run(reader, run_id, store)
    finally:
        reader.close()
