"""Service actors that hold the heavy libraries, so role actors stay small.

* LLMGatewayActor: every model call of every run (litellm lives here), so retries, provider
  concurrency caps and usage accounting are global.
* MarketDataActor: every tool call and the deterministic context (pandas, pandas-ta, yfinance
  and the data cache live here), so vendor rate limits and the cache are shared.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import importlib
import threading
from typing import Any

import ray


@ray.remote(num_cpus=0, max_concurrency=1000)
class LLMGatewayActor:
    def __init__(self, concurrency_per_provider: dict[str, int] | None = None):
        from providers.gateway import LLMGateway
        from actors.logs import configure
        configure()
        self._gateway = LLMGateway(concurrency_per_provider)

    async def complete(self, request: Any) -> Any:
        return await self._gateway.complete(request)

    def usage(self) -> dict:
        return self._gateway.usage()


@ray.remote(num_cpus=0, max_concurrency=64)
class MarketDataActor:
    """Blocking vendor calls run in threads; one MarketData per distinct data configuration."""

    def __init__(self, cache_path: str | None = None):
        from actors.logs import configure
        configure()
        self.cache_path = cache_path
        self._services: dict[tuple, Any] = {}
        self._lock = asyncio.Lock()
        # pandas, pandas-ta and the vendors take ~1 s to import: do it while the rest of the
        # team starts, not on the first run's critical path.
        threading.Thread(target=_warm_imports, daemon=True).start()

    async def _service(self, config: Any) -> Any:
        key = (tuple(sorted((k, tuple(v)) for k, v in config.vendors.items())),
               tuple(sorted((k, tuple(v)) for k, v in config.tool_vendors.items())),
               config.data_dir)
        async with self._lock:
            if key not in self._services:
                from data.service import MarketData
                self._services[key] = await asyncio.to_thread(
                    MarketData, vendors=config.vendors, tool_vendors=config.tool_vendors,
                    data_dir=config.data_dir, cache_path=self.cache_path)
            return self._services[key]

    async def call_tool(self, name: str, arguments: dict, trade_date: dt.date, config: Any) -> Any:
        service = await self._service(config)
        return await asyncio.to_thread(service.call_tool, name, arguments, trade_date)

    async def identity(self, config: Any) -> Any:
        service = await self._service(config)
        return await asyncio.to_thread(service.identity, config.ticker)

    async def snapshot(self, config: Any) -> Any:
        service = await self._service(config)
        return await asyncio.to_thread(service.snapshot, config.ticker, config.trade_date)

    async def closes(self, config: Any, symbol: str, start: dt.date, end: dt.date) -> list:
        service = await self._service(config)
        return await asyncio.to_thread(service.closes, symbol, start, end)

    async def benchmark_for(self, config: Any) -> str:
        service = await self._service(config)
        return service.benchmark_for(config.ticker, config.benchmark)


def _warm_imports() -> None:
    for module in ("data.service", "data.indicators", "pandas_ta"):
        try:
            importlib.import_module(module)
        except ImportError:  # reported properly when a tool is called
            return
