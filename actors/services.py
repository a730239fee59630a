"""Service actors that hold the heavy libraries, so role actors stay small.

* LLMGatewayActor: every model call of every run (litellm lives here), so retries, provider
  concurrency caps and usage accounting are global.
* MarketDataActor: every tool call and the deterministic context (pandas, pandas-ta, yfinance
  and the data cache live here), so vendor rate limits and the cache are shared.
"""
from __future__ import annotations

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

    async def profile(self, model: str, base_url: str | None = None, *,
                      context_window: int | None = None,
                      concurrency: int | None = None) -> Any:
        return await self._gateway.profile(model, base_url, context_window=context_window,
                                           concurrency=concurrency)

    def streams(self) -> list[dict]:
        """Calls streaming now, with tokens/s (the CLI's live progress polls this)."""
        return self._gateway.streams()

    def usage(self) -> dict:
        return self._gateway.usage()

    def pid(self) -> int:
        import os
        return os.getpid()


@ray.remote(num_cpus=0, max_concurrency=64)
class MarketDataActor:
    """A market-data replica: a thin shell around ``MarketDesk`` (blocking vendor calls run
    in threads; one MarketData per distinct data configuration; its own cache file)."""

    def __init__(self, cache_path: str | None = None):
        from actors.logs import configure
        from actors.ports import MarketDesk
        configure()
        self._desk = MarketDesk(cache_path, throttle=_cluster_throttle)
        # pandas, pandas-ta and the vendors take ~1 s to import: do it while the rest of the
        # team starts, not on the first run's critical path.
        threading.Thread(target=_warm_imports, daemon=True).start()

    async def call_tools(self, calls: list, trade_date: dt.date, config: Any) -> list:
        return await self._desk.call_tools(calls, trade_date, config)

    async def identity(self, config: Any) -> Any:
        return await self._desk.identity(config)

    async def snapshot(self, config: Any) -> Any:
        return await self._desk.snapshot(config)

    async def closes(self, config: Any, symbol: str, start: dt.date, end: dt.date) -> list:
        return await self._desk.closes(config, symbol, start, end)

    async def benchmark_for(self, config: Any) -> str:
        return await self._desk.benchmark_for(config)

    def pid(self) -> int:
        import os
        return os.getpid()


@ray.remote(num_cpus=0, max_concurrency=1000)
class LimiterActor:
    """Vendor rate limits for the whole cluster: replicas reserve a token, then wait."""

    def __init__(self) -> None:
        from data.limits import Buckets
        self._buckets = Buckets()

    def reserve(self, vendor: str) -> float:
        return self._buckets.reserve(vendor)


def _cluster_throttle(vendor: str) -> None:
    """Wait for ``vendor``'s token from the cluster's limiter (runs in a vendor thread). If
    the limiter cannot be reached, fall back to this replica's own bucket: slower to share,
    never unlimited."""
    import time

    from actors import pools
    try:
        wait = ray.get(pools.ensure_limiter().reserve.remote(vendor), timeout=30)
    except Exception:  # noqa: BLE001 - degrade to a local limit, never to none
        wait = _local_buckets().reserve(vendor)
    time.sleep(wait)


_LOCAL: list = []


def _local_buckets() -> Any:
    if not _LOCAL:
        from data.limits import Buckets
        _LOCAL.append(Buckets())
    return _LOCAL[0]


def _warm_imports() -> None:
    for module in ("data.service", "data.indicators", "pandas_ta"):
        try:
            importlib.import_module(module)
        except ImportError:  # reported properly when a tool is called
            return
