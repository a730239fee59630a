"""The worker: the run pool's replica. A thin Ray shell around ``RunDriver`` — it drives the
runs whose ids hash to it and plays their turns (any role), through the store, gateway and
market-data actors. It imports no heavy library (no litellm, pandas or duckdb)."""
from __future__ import annotations

import sys
import uuid
from typing import Any

import ray

from actors.driving import RunDriver
from actors.remote import RemoteLLM, RemoteMarket, RemoteStore, owner_alive
from events import domain as d

HEAVY = ("litellm", "pandas", "duckdb", "yfinance", "pandas_ta")


@ray.remote(num_cpus=0, max_concurrency=10_000)
class Worker:
    def __init__(self, name: str, index: int):
        from actors.logs import configure
        configure()
        self.name, self.index = name, index
        self.incarnation = uuid.uuid4().hex[:12]  # new after every restart
        self.node = ray.get_runtime_context().get_node_id()
        self._llm = RemoteLLM()
        self._market = RemoteMarket(index, self.node)
        self._drivers: dict[str, RunDriver] = {}

    def _driver(self, path: str) -> RunDriver:
        if path not in self._drivers:
            self._drivers[path] = RunDriver(
                store=RemoteStore(path), llm=self._llm, market=self._market,
                owner=f"{self.name}/{self.incarnation}", node=self.node,
                is_alive=owner_alive)
        return self._drivers[path]

    async def drive(self, path: str, run_id: str, resume: d.RunResumed | None = None,
                    follow: bool = True) -> dict:
        return await self._driver(path).drive(run_id, resume=resume, follow=follow)

    async def resolve_outcomes(self, path: str, config: Any, ticker: str | None = None) -> int:
        return await self._driver(path).outcomes.resolve(config, ticker)

    def driving(self) -> tuple[str, list[str]]:
        """This incarnation and the runs it is driving now (the lease's liveness check)."""
        return self.incarnation, [r for drv in self._drivers.values() for r in drv.driving()]

    def where(self) -> dict:
        import os
        return {"name": self.name, "node": self.node, "pid": os.getpid(),
                "incarnation": self.incarnation}

    def imported_heavy(self) -> list[str]:
        """Heavy libraries loaded in this process (there should be none)."""
        return sorted(m for m in HEAVY if m in sys.modules)
