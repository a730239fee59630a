"""A command's side of the team: join or start Ray, bind a store file, drive runs to their
end through the worker pool, and read the store while they go.

This is the only door the CLI has to Ray. Driving survives the death of a worker: a drive
call that fails because its replica died is made again once Ray has restarted it (the run
continues from its events; its recorded calls are not repeated). Runs are started in
windows of ``max_in_flight``, so a long watchlist shows progress from its first runs.
"""
from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ray

from actors import pools, runtime
from actors.remote import TRANSIENT, owner_alive
from events import domain as d
from events.envelope import NewEvent, StoredEvent
from events.errors import one_line
from events.store import StoreError

#: Drive calls a run may lose to dying workers before the command gives up on it.
MAX_DRIVE_RETRIES = 5
MAX_IN_FLIGHT = 256


class Session:
    def __init__(self, store_path: str | os.PathLike, address: str | None = None,
                 workers: int | None = None):
        self.path = Path(store_path).expanduser()
        self.address, self.workers = address, workers
        self.team: runtime.Team | None = None
        self._owned = False

    # ---- lifetime -----------------------------------------------------------------------
    def __enter__(self) -> Session:
        self._owned = runtime.start(self.address)
        try:
            self.team = runtime.team(self.path, self.workers)
            problem = ray.get(self.team.store.open.remote())
            if problem:
                raise StoreError(problem)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.team is not None and not self.address:
                runtime.release_store(self.team.store)  # other processes may open the file
        finally:
            if self._owned:
                ray.shutdown()

    @property
    def _team(self) -> runtime.Team:
        assert self.team is not None, "use the session in a with-block"
        return self.team

    # ---- the store ----------------------------------------------------------------------
    def append(self, stream: str, events: Sequence[NewEvent], *,
               expected_version: int | None = None, idempotency_key: str | None = None
               ) -> list[StoredEvent]:
        return ray.get(self._team.store.append.remote(
            stream, list(events), expected_version=expected_version,
            idempotency_key=idempotency_key))

    def append_many(self, requests: Sequence[tuple[str, Sequence[NewEvent], str | None]]
                    ) -> None:
        """Several appends at once (one group commit in the store actor)."""
        ray.get([self._team.store.append.remote(stream, list(events), expected_version=0,
                                                idempotency_key=key)
                 for stream, events, key in requests])

    def read_stream(self, stream: str) -> list[StoredEvent]:
        return ray.get(self._team.store.read_stream.remote(stream))

    def read_all(self, after_position: int = 0, types: Sequence[str] | None = None
                 ) -> list[StoredEvent]:
        return ray.get(self._team.store.read_all.remote(after_position, None,
                                                        list(types) if types else None))

    def query(self, name: str, params: dict) -> list[dict]:
        """A named read-model query (projections.views)."""
        return ray.get(self._team.store.query.remote(name, params))

    # ---- the gateway ----------------------------------------------------------------------
    def llm_streams(self) -> list[dict]:
        """Model calls streaming now (run, role, tokens, tokens/s), for the live progress;
        empty when the gateway does not answer within a second (progress must not stall)."""
        try:
            return ray.get(self._team.gateway.streams.remote(), timeout=1.0)
        except Exception:  # noqa: BLE001 - a progress display never fails a command
            return []

    # ---- driving --------------------------------------------------------------------------
    def owner_alive(self, owner: str, run_id: str) -> bool:
        import asyncio
        return asyncio.run(owner_alive(owner, run_id))

    def drive(self, run_ids: Sequence[str], *, resume: d.RunResumed | None = None,
              follow: bool = True, on_tick: Callable[[], None] | None = None,
              max_in_flight: int = MAX_IN_FLIGHT) -> dict[str, dict]:
        """Drive every run to its end (in windows of ``max_in_flight``); ``on_tick`` is
        called about twice a second while they go. Returns each run's summary."""
        team, path = self._team, str(self.path.resolve())
        waiting, refs = deque(run_ids), {}
        deaths: dict[str, int] = {}
        results: dict[str, dict] = {}
        while waiting or refs:
            while waiting and len(refs) < max_in_flight:
                run_id = waiting.popleft()
                worker = team.worker_for(run_id)
                refs[worker.drive.remote(path, run_id, resume, follow)] = run_id
            ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0.5)
            for ref in ready:
                run_id = refs.pop(ref)
                try:
                    results[run_id] = ray.get(ref)
                except TRANSIENT as exc:  # its worker died: drive it again once back
                    deaths[run_id] = deaths.get(run_id, 0) + 1
                    if deaths[run_id] <= MAX_DRIVE_RETRIES:
                        waiting.append(run_id)
                        continue
                    results[run_id] = _lost(run_id, pools.replica_for(
                        run_id, team.pools.workers), exc)
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if isinstance(exc.cause, BaseException) else exc
                    results[run_id] = _lost(run_id, None, cause)
            if on_tick:
                on_tick()
        return results

    def resolve_outcomes(self, config: Any, ticker: str | None = None) -> int:
        worker = self._team.worker_for("memory")
        return ray.get(worker.resolve_outcomes.remote(str(self.path.resolve()), config, ticker))

    def grow(self) -> None:
        self._team.grow(self.workers)


def _lost(run_id: str, worker: str | None, exc: BaseException) -> dict:
    text = one_line(exc)
    where = f" ({worker} kept dying)" if worker else ""
    return {"run_id": run_id, "status": "incomplete", "rating": None, "driver": worker,
            "reason": f"{text}{where}; continue with `ta-actors resume {run_id}`"}


class ActorReader:
    """The read API of an event store, answered by a running store actor (``--address``)."""

    def __init__(self, store_path: str | os.PathLike, address: str):
        runtime.start(address)
        self._h = runtime.store_actor(store_path)

    def read_stream(self, stream: str, from_seq: int = 1) -> list:
        return ray.get(self._h.read_stream.remote(stream, from_seq))

    def read_all(self, after_position: int = 0, limit: int | None = None,
                 types: list[str] | None = None) -> list:
        return ray.get(self._h.read_all.remote(after_position, limit, types))

    def list_streams(self) -> list:
        return ray.get(self._h.list_streams.remote())

    def verify(self, stream: str) -> Any:
        return ray.get(self._h.verify.remote(stream))

    def verify_all(self, **options: Any) -> Any:
        return ray.get(self._h.verify_all.remote(**options))

    def head_anchor(self) -> dict:
        return ray.get(self._h.head_anchor.remote())

    def query(self, name: str, params: dict | None = None, progress: Any = None) -> list[dict]:
        """A named read-model query (the actor catches its read models up first)."""
        return ray.get(self._h.query.remote(name, params))

    def rebuild(self, progress: Any = None) -> tuple[int, dict[str, int]]:
        return ray.get(self._h.rebuild.remote())

    def close(self) -> None:
        """The actor stays; nothing to release here."""
