"""Starting or joining Ray, and finding the named actors of ta-actors.

Single node: ``start()`` starts a local Ray sized for this machine. Cluster: ``start("auto")``
joins it; the actors are detached, so later commands (replay, resume) find them.
Service and role actors are shared by every store; one store actor per DuckDB file.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from actors.coordinator import Coordinator
from actors.roles import RoleActor
from actors.services import LLMGatewayActor, MarketDataActor
from actors.store_actor import EventStoreActor, StoreRef

NAMESPACE = "ta-actors"
ROLES = ("market", "social", "news", "fundamentals", "bull", "bear", "research_manager",
         "trader", "aggressive", "conservative", "neutral", "portfolio_manager", "reflector")
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
    ray.init(num_cpus=num_cpus or max(2, os.cpu_count() or 2), **kwargs)
    return True


def _named(cls: Any, name: str, *args: Any, pin_here: bool = False) -> Any:
    # Detached: a named actor that is not detached dies when the last handle to it goes out
    # of scope, and a later get_if_exists could then hand out a dying actor. A local Ray
    # started by the CLI ends with the CLI, so nothing is left behind there.
    options: dict[str, Any] = dict(name=name, namespace=NAMESPACE, get_if_exists=True,
                                   lifetime="detached")
    if pin_here:  # the store actor must live on the node that has the file
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False)
    return cls.options(**options).remote(*args)


def default_cache_path() -> str:
    from platformdirs import user_cache_dir
    return os.environ.get("TA_ACTORS_CACHE",
                          str(Path(user_cache_dir("ta-actors")) / "market-cache.duckdb"))


@dataclass
class Team:
    """Handles to every actor a run needs."""
    store: Any
    coordinator: Any
    gateway: Any
    market: Any
    roles: dict[str, Any]


def store_actor(path: str | os.PathLike) -> StoreRef:
    """The store actor (one per cluster, on the node that has the files), bound to ``path``."""
    resolved = str(Path(path).expanduser().resolve())
    return StoreRef(_named(EventStoreActor, "event-store", pin_here=True), resolved)


def team(store_path: str | os.PathLike, cache_path: str | None = None) -> Team:
    """Every actor, created in the order a run needs them: Ray starts worker processes a few
    at a time, so the store, the coordinator, the services and the analysts come first and
    the later roles start while the analysts work."""
    store = store_actor(store_path)
    gateway = _named(LLMGatewayActor, "llm-gateway")
    market = _named(MarketDataActor, "market-data", cache_path or default_cache_path())
    coordinator = _named(Coordinator, "coordinator", role_actor_names(), gateway, market)
    roles = {role: _named(RoleActor, name, role, gateway, market)
             for role, name in role_actor_names().items()}
    return Team(store, coordinator, gateway, market, roles)


def role_actor_names() -> dict[str, str]:
    return {role: f"role-{role}" for role in ROLES}


def release_store(store: StoreRef) -> None:
    """Close the DuckDB file so that other processes can open it (the actor stays)."""
    ray.get(store.close.remote())
