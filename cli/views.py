"""The read models of a store, for the CLI: the file itself when no process holds it (opened
read-write: a read model is a cache that catches up with the events on open, and may be
deleted any time), else the cluster's store actor (``--address``)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from events.errors import InvalidInput, StoreError

Progress = Callable[[int, int], None] | None


class LocalViews:
    def __init__(self, store: Path):
        from events.duckdb_store import DuckDBEventStore
        from events.views import ViewRecorder, connection_for
        from projections.views import VIEWS
        self.store = DuckDBEventStore(store)
        try:
            self.views = self._checked(ViewRecorder, connection_for(self.store), VIEWS)
        except BaseException:
            self.store.close()
            raise

    def _checked(self, fn: Callable, *args: object, **kwargs: object) -> Any:
        """``fn(...)``, with a damaged file reported as the store reports it (one line)."""
        from events.duckdb_store import _DAMAGE
        try:
            return fn(*args, **kwargs)
        except _DAMAGE as exc:
            raise self.store._damaged(exc) from None

    def query(self, name: str, params: dict | None = None, progress: Progress = None
              ) -> list[dict]:
        self._checked(self.views.catch_up, self.store, progress=progress)
        return self._checked(self.views.query, name, params)

    def rebuild(self, progress: Progress = None) -> tuple[int, dict[str, int]]:
        return self._checked(self.views.rebuild, self.store, progress=progress)

    def close(self) -> None:
        self.views.close()
        self.store.close()


def open_views(store: Path, address: str | None) -> Any:
    if address:
        from actors.session import ActorReader  # the cluster's store actor answers
        return ActorReader(store, address)
    if not store.exists():
        raise InvalidInput(f"no event store at {store} (run something first, or pass --store)")
    try:
        return LocalViews(store)
    except StoreError as exc:
        raise InvalidInput(str(exc)) from None
