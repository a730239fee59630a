"""Starting or joining Ray, and the actors a command needs.

Single node: ``start()`` starts a local Ray sized for this machine: four processes (store,
gateway, one worker, one market-data replica). Cluster: ``start("auto")`` joins it; the
actors are detached, so later commands (replay, resume) and other drivers find them by name.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from actors import pools
from actors.pools import NAMESPACE, Pools, default_cache_path
from actors.store_actor import StoreRef

__all__ = ["NAMESPACE", "Team", "default_cache_path", "release_store", "start", "store_actor",
           "team"]

_WORKER_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "RAY_USAGE_STATS_ENABLED": "0",
               "TOKENIZERS_PARALLELISM": "false"}


def start(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Join or start Ray; returns True when it started a local Ray this process owns."""
    for key, value in _WORKER_ENV.items():
        os.environ.setdefault(key, value)
    if ray.is_initialized():
        return False
    # Workers inherit this process's environment on a local Ray; a cluster sets the same
    # variables in ray_cluster.yaml. (A runtime_env here would route every worker start
    # through the runtime-env agent, which costs seconds on a small machine.)
    kwargs: dict[str, Any] = dict(namespace=NAMESPACE, include_dashboard=False,
                                  log_to_driver=False, configure_logging=False)
    if address:
        ray.init(address=address, **kwargs)
        return False
    # "local": always a Ray of our own, even when `ray start` left a cluster on this machine
    # (joining one is what --address is for)
    ray.init(address="local", num_cpus=num_cpus or max(2, os.cpu_count() or 2), **kwargs)
    return True


@dataclass
class Team:
    """Handles to the actors a command needs: the store file, the gateway, the pools."""
    store: StoreRef
    gateway: Any
    pools: Pools

    def worker_for(self, run_id: str) -> Any:
        """The replica that drives ``run_id`` (a stable hash over the worker pool)."""
        name = pools.replica_for(run_id, self.pools.workers)
        return pools.lookup(name) or pools.ensure_worker(self.pools.workers.index(name))

    def workers(self) -> list[Any]:
        return [pools.lookup(n) for n in self.pools.workers]

    def grow(self, workers: int | None = None) -> None:
        """Follow the cluster: nodes that joined get replicas (between batches)."""
        self.pools = pools.ensure_pools(workers)


def store_actor(path: str | os.PathLike) -> StoreRef:
    """The store actor (one per cluster, on the node that has the files), bound to ``path``."""
    resolved = str(Path(path).expanduser().resolve())
    return StoreRef(pools.ensure_store(), resolved)


def team(store_path: str | os.PathLike, workers: int | None = None) -> Team:
    """Every actor a run needs, created in the order a run needs them (the store, the
    gateway, then per node a market-data replica and a worker)."""
    store = store_actor(store_path)
    gateway = pools.ensure_gateway()
    return Team(store, gateway, pools.ensure_pools(workers))


def release_store(store: StoreRef) -> None:
    """Close the DuckDB file so that other processes can open it (the actor stays)."""
    ray.get(store.close.remote())
