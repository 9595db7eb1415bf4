"""Map the server's `Settings` onto Ray Serve deployment options (pure; no Ray needed)."""

from __future__ import annotations

from typing import Any

from oai_server.settings import Settings

ROUTER_CLASS = "oai_server.ray_serve.router.CacheAffinityRouter"
# The gateway only reads bodies and forwards bytes: a tenth of a CPU each.
GATEWAY_CPUS = 0.1
GATEWAY_MAX_ONGOING = 10_000

# Serve's own health probe: three failures in a row (~6 s) and the replica is replaced.
HEALTH_CHECK_PERIOD_S = 2.0
HEALTH_CHECK_TIMEOUT_S = 30.0


def resources(settings: Settings) -> dict[str, Any]:
    """What each replica asks Ray for: CPUs, and GPUs for its engine.

    One engine worker per GPU: with `tensor_parallel_size` N > 1 the replica reserves a
    placement group of N bundles, the first holding the replica itself, packed on one node
    (vLLM starts its tensor-parallel workers in the replica's placement group).
    """
    tp = settings.tensor_parallel_size
    if settings.ray_num_gpus > 0 and tp > 1:
        first = {"CPU": settings.ray_num_cpus, "GPU": settings.ray_num_gpus}
        return {
            "placement_group_bundles": [first] + [{"GPU": settings.ray_num_gpus}] * (tp - 1),
            "placement_group_strategy": "STRICT_PACK",
        }
    actor: dict[str, Any] = {"num_cpus": settings.ray_num_cpus}
    if settings.ray_num_gpus > 0:
        actor["num_gpus"] = settings.ray_num_gpus
    return {"ray_actor_options": actor}


def autoscaling(settings: Settings) -> dict[str, Any]:
    """Serve's autoscaling config: replicas follow the ongoing requests per replica.

    Serve averages them over `look_back_period_s` (30 s); replicas and proxies report every
    RAY_SERVE_{REPLICA,HANDLE}_AUTOSCALING_METRIC_PUSH_INTERVAL_S seconds (Ray's
    environment variables, default 10).
    """
    return {
        "min_replicas": settings.ray_min_replicas,
        "initial_replicas": max(settings.ray_min_replicas, 1),
        "max_replicas": max(settings.ray_max_replicas, settings.ray_min_replicas, 1),
        "target_ongoing_requests": settings.ray_target_ongoing_requests,
        "upscale_delay_s": settings.ray_upscale_delay_s,
        "downscale_delay_s": settings.ray_downscale_delay_s,
    }


def deployment_options(settings: Settings) -> dict[str, Any]:
    """Every option of the Serve deployment, for `Deployment.options(**...)`."""
    router: dict[str, Any] = {}
    if settings.ray_router == "affinity":
        router["request_router_config"] = {
            "request_router_class": ROUTER_CLASS,
            "request_router_kwargs": {"target": settings.ray_target_ongoing_requests},
        }
    return {
        **router,
        **resources(settings),
        "autoscaling_config": autoscaling(settings),
        "max_ongoing_requests": settings.ray_max_ongoing_requests,
        "graceful_shutdown_timeout_s": settings.ray_graceful_shutdown_timeout_s,
        "graceful_shutdown_wait_loop_s": 1.0,
        "health_check_period_s": HEALTH_CHECK_PERIOD_S,
        "health_check_timeout_s": HEALTH_CHECK_TIMEOUT_S,
    }


def gateway_options(settings: Settings) -> dict[str, Any]:
    """The affinity gateway's deployment: small; one per replica at most.

    Each gateway replica learns its own response ids; a conversation continued through
    another gateway replica finds its replica in the store (`recorded.py`).
    """
    return {
        "ray_actor_options": {"num_cpus": GATEWAY_CPUS},
        "autoscaling_config": {
            "min_replicas": 1,
            "max_replicas": max(settings.ray_max_replicas, 1),
            "target_ongoing_requests": settings.ray_target_ongoing_requests * 4,
        },
        "max_ongoing_requests": GATEWAY_MAX_ONGOING,
    }
