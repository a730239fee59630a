"""`ta-actors verify --address`: the store actor verifies the file it holds, with the same
options as the local command (incremental, exported anchors). The actor and this process
resolve the chain key the same way (the session's key file, see conftest)."""
from __future__ import annotations

import json

from events.domain import TurnAssigned
from events.envelope import NewEvent


def test_verify_through_the_store_actor(cli, ray_team, store_path, tmp_path):
    from actors import runtime
    ref = runtime.store_actor(store_path)
    import ray
    for stream in ("run-a", "run-b"):
        ray.get(ref.append.remote(stream, [NewEvent(TurnAssigned(turn_id=f"{stream}-{i}",
                                                                 role="bull"), actor="t")
                                           for i in range(3)]))
    try:
        head = tmp_path / "head.json"
        first = cli("verify", "--store", store_path, "--address", "auto", "--json",
                    "--anchor", head)
        report = json.loads(first.stdout)
        assert first.exit_code == 0 and report["ok"] and report["checkpoint"] == 6
        assert json.loads(head.read_text())["position"] == 6
        ray.get(ref.append.remote("run-c", [NewEvent(TurnAssigned(turn_id="c", role="bear"),
                                                     actor="t")]))
        again = cli("verify", "--store", store_path, "--address", "auto", "--json",
                    "--incremental", "--against", head)
        report = json.loads(again.stdout)
        assert again.exit_code == 0 and report["ok"]
        assert (report["from_position"], report["events"]) == (6, 1)
    finally:
        runtime.release_store(ref)
