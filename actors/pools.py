"""Where every actor of ta-actors lives, and how many there are.

* ``event-store``: one per cluster, pinned to the node that holds the DuckDB files (one
  writer per file); restarted there if its process dies.
* ``llm-gateway``: one per cluster: every model call goes through it, which keeps provider
  and endpoint concurrency limits global.
* ``worker-i``: the run pool. A run is driven, and its turns are played, by the replica its
  run id hashes to; any replica can play any role.
* ``market-data-i``: the data pool, one beside each worker, each with its own cache file.
* ``vendor-limiter``: one per cluster, created on the first call to a remote vendor: the
  replicas reserve vendor tokens from it, so a vendor's rate limit holds cluster-wide.

Pools follow the cluster: one worker and one market-data replica per alive node with CPUs
(or ``workers`` of each), grown when nodes join; a replica whose node leaves is created again on
another. Every actor restarts after a crash (``max_restarts=-1``); callers re-resolve by name.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import ray

NAMESPACE = "ta-actors"
STORE, GATEWAY, LIMITER = "event-store", "llm-gateway", "vendor-limiter"


def worker_name(i: int) -> str:
    return f"worker-{i}"


def market_name(i: int) -> str:
    return f"market-data-{i}"


def replica_for(key: str, names: list[str]) -> str:
    """A stable choice of replica for ``key`` (the same in every process and every run)."""
    digest = hashlib.sha256(key.encode()).digest()
    return names[int.from_bytes(digest[:8], "big") % len(names)]


def alive_nodes() -> list[str]:
    """Ids of alive nodes that offer CPUs, in a stable order."""
    return sorted(n["NodeID"] for n in ray.nodes()
                  if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0)


def lookup(name: str) -> Any | None:
    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None


def _affinity(node_id: str | None, soft: bool) -> dict[str, Any]:
    # Hard affinity: Ray ignores soft affinity for zero-CPU actors. A replica restarts on
    # its node after a crash; when the node itself leaves, the replica is gone with it, its
    # name is free again, and the next caller creates it on a live node (``ensure_*``).
    if node_id is None:
        return {}
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=soft)}


def create(cls: Any, name: str, *args: Any, node_id: str | None = None,
           soft: bool = False) -> Any:
    """The named actor, created if missing (detached: it outlives the command that made it,
    so later commands and other drivers find it; a local Ray ends with its CLI anyway)."""
    options: dict[str, Any] = dict(name=name, namespace=NAMESPACE, get_if_exists=True,
                                   lifetime="detached", max_restarts=-1,
                                   **_affinity(node_id, soft))
    return cls.options(**options).remote(*args)


def default_cache_path(index: int = 0) -> str:
    """Each market-data replica keeps its own cache file (DuckDB: one writer per file)."""
    from events.settings import setting
    base = str(setting("TA_ACTORS_CACHE"))
    if index == 0:
        return base
    stem, dot, ext = base.rpartition(".")
    return f"{stem}-{index}.{ext}" if dot else f"{base}-{index}"


def ensure_limiter() -> Any:
    from actors.services import LimiterActor
    return lookup(LIMITER) or create(LimiterActor, LIMITER)


def ensure_gateway() -> Any:
    from actors.services import LLMGatewayActor
    return lookup(GATEWAY) or create(LLMGatewayActor, GATEWAY)


def _node_for(i: int) -> str | None:
    nodes = alive_nodes()
    return nodes[i % len(nodes)] if nodes else None


def ensure_market(i: int, node_id: str | None = None) -> Any:
    from actors.services import MarketDataActor
    return lookup(market_name(i)) or create(MarketDataActor, market_name(i),
                                            default_cache_path(i),
                                            node_id=node_id or _node_for(i))


def ensure_worker(i: int, node_id: str | None = None) -> Any:
    from actors.worker import Worker
    return lookup(worker_name(i)) or create(Worker, worker_name(i), worker_name(i), i,
                                            node_id=node_id or _node_for(i))


def ensure_store() -> Any:
    """The store actor, created on this node if it does not exist (the node with the file)."""
    from actors.store_actor import EventStoreActor
    return lookup(STORE) or create(EventStoreActor, STORE,
                                   node_id=ray.get_runtime_context().get_node_id(), soft=False)


@dataclass(frozen=True)
class Pools:
    workers: list[str]
    markets: list[str]


def ensure_pools(workers: int | None = None) -> Pools:
    """Grow the pools to the cluster: ``workers`` replicas if given, else one on every alive
    node — a node that joined gets its own, even where replicas recreated after their node
    left already make up the count. Never shrinks. Market data first, since a worker's
    first run needs it at once."""
    nodes = alive_nodes() or [None]
    size = 0
    while lookup(worker_name(size)) is not None:
        size += 1
    target = max(size, workers or 0)
    for i in range(target):  # existing replicas (and their market data) plus --workers more
        ensure_market(i, nodes[i % len(nodes)])
        ensure_worker(i, nodes[i % len(nodes)])
    if workers is None:
        where = ray.get([ensure_worker(i).where.remote() for i in range(target)],
                        timeout=60) if target else []
        hosting = {w["node"] for w in where}
        for node in nodes:
            if node is None or node not in hosting:
                ensure_market(target, node)
                ensure_worker(target, node)
                target += 1
    return Pools([worker_name(i) for i in range(target)],
                 [market_name(i) for i in range(target)])
