"""ray_cluster.yaml passes Ray's own cluster-config validation (the schema `ray up` uses)."""
from __future__ import annotations

from pathlib import Path

import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

REPO = Path(__file__).resolve().parents[1]


def test_the_cluster_file_is_valid_for_ray_up():
    config = yaml.safe_load((REPO / "ray_cluster.yaml").read_text())
    validate_config(prepare_config(config))  # as `ray up` does: defaults filled, then schema
    assert config["provider"]["type"] == "local"
    started = " ".join(config["head_start_ray_commands"] + config["worker_start_ray_commands"])
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in started


def test_a_wrong_key_would_be_caught():
    import jsonschema
    import pytest
    config = yaml.safe_load((REPO / "ray_cluster.yaml").read_text()) | {"max_worker": 2}
    with pytest.raises(jsonschema.ValidationError, match="max_worker"):
        validate_config(prepare_config(config))
