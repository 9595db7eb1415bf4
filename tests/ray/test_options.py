"""Settings become Serve deployment options; the shipped Serve config builds (no Ray needed)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from ray.serve import Application
from ray.serve.schema import ServeDeploySchema

from oai_server.ray_serve import build_app
from oai_server.ray_serve.deployment import DEPLOYMENT_NAME, GATEWAY_NAME
from oai_server.ray_serve.options import deployment_options
from oai_server.ray_serve.router import CacheAffinityRouter
from oai_server.settings import Settings

CONFIG = Path(__file__).resolve().parents[2] / "oai_server" / "ray_serve" / "serve_config.yaml"


def test_cpu_replicas_reserve_cpus_and_scale_between_the_bounds() -> None:
    options = deployment_options(
        Settings(ray_min_replicas=2, ray_max_replicas=5, ray_target_ongoing_requests=8)
    )
    assert options["ray_actor_options"] == {"num_cpus": 1.0}
    scaling = options["autoscaling_config"]
    assert (scaling["min_replicas"], scaling["max_replicas"]) == (2, 5)
    assert scaling["target_ongoing_requests"] == 8
    assert "placement_group_bundles" not in options


def test_one_gpu_engine_asks_for_a_gpu() -> None:
    options = deployment_options(Settings(ray_num_gpus=1, ray_num_cpus=4))
    assert options["ray_actor_options"] == {"num_cpus": 4.0, "num_gpus": 1.0}


def test_tensor_parallel_replicas_reserve_one_packed_bundle_per_gpu() -> None:
    options = deployment_options(Settings(ray_num_gpus=1, tensor_parallel_size=4))
    assert options["placement_group_bundles"] == [
        {"CPU": 1.0, "GPU": 1.0},
        {"GPU": 1.0},
        {"GPU": 1.0},
        {"GPU": 1.0},
    ]
    assert options["placement_group_strategy"] == "STRICT_PACK"
    assert "ray_actor_options" not in options


def test_scale_to_zero_still_starts_one_replica() -> None:
    scaling = deployment_options(Settings(ray_min_replicas=0))["autoscaling_config"]
    assert (scaling["min_replicas"], scaling["initial_replicas"]) == (0, 1)


def test_the_builder_rejects_a_misspelt_setting() -> None:
    with pytest.raises(ValueError, match="ray_max_replica"):
        build_app({"ray_max_replica": 3})


def test_the_shipped_serve_config_builds_the_app() -> None:
    config = yaml.safe_load(CONFIG.read_text())
    ServeDeploySchema.model_validate(config)  # what `serve run` / `serve deploy` check first
    (app,) = config["applications"]
    assert app["import_path"] == "oai_server.ray_serve:build_app"
    assert isinstance(build_app(app["args"]), Application)


def test_the_affinity_router_puts_the_gateway_in_front() -> None:
    options = deployment_options(Settings(ray_router="affinity", ray_target_ongoing_requests=4))
    router = options["request_router_config"]
    assert router["request_router_kwargs"] == {"target": 4}
    module, _, name = router["request_router_class"].rpartition(".")
    assert getattr(importlib.import_module(module), name) is CacheAffinityRouter
    assert "request_router_config" not in deployment_options(Settings())
    app = build_app({"ray_router": "affinity"})
    assert app._bound_deployment.name == GATEWAY_NAME
    assert build_app({})._bound_deployment.name == DEPLOYMENT_NAME
