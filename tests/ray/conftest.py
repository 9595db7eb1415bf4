"""One local Ray and Serve for the whole session; each test module deploys its own app.

Ray starts slowly on two cores, so the session shares it. The replicas import the fake
engine from this package, so the repository root goes onto their PYTHONPATH.
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray
from ray import serve
from ray.exceptions import GetTimeoutError, RayActorError

from oai_server.ray_serve import build_app

ROOT = Path(__file__).resolve().parents[2]
FAKE = "tests.ray.engines:slow_fake"
FAKE_EMBEDDER = "tests.ray.engines:fake_embedder"
MODEL = "smollm2-135m-instruct"


# Ports handed to Ray: above its workers' (10002-19999), below the kernel's ephemeral range
# (Linux's starts at 32768). Ray binds them only once its processes are up, seconds later on
# a loaded machine, and meanwhile its own servers take ports from the ephemeral range: a
# free one from there was taken by then ("Address already in use", and the raylet went
# down with its dashboard agent).
RAY_PORTS = range(20000, 32768)


def free_port() -> int:
    """A port of `RAY_PORTS` free now, picked at random."""
    for port in random.sample(RAY_PORTS, len(RAY_PORTS)):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {RAY_PORTS}")


@dataclass(frozen=True)
class RayServe:
    url: str  # Serve's HTTP proxy
    metrics_url: str  # the node's Prometheus endpoint: every process's Ray metrics


@pytest.fixture(scope="session")
def ray_serve() -> Iterator[RayServe]:
    """Serve's proxy on a free 127.0.0.1 port of a small local Ray."""
    with pytest.MonkeyPatch.context() as env:  # the variables go with the session's Ray
        # Load reports every half second (default 10 s), so the autoscaling test is quick.
        for reporter in ("REPLICA", "HANDLE"):
            env.setenv(f"RAY_SERVE_{reporter}_AUTOSCALING_METRIC_PUSH_INTERVAL_S", "0.5")
        # The proxy has three readiness checks of 5 s to start in (then Serve kills it): on
        # a loaded machine it started 13 s after the first, too late. A minute each.
        env.setenv("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")
        yield from _local_ray_serve()


def _local_ray_serve() -> Iterator[RayServe]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    metrics_port = free_port()
    # Ray waits 30 s for its GCS server to bind its port; a full run on a loaded 2-core
    # machine, from a fresh clone (the binary not yet read from disk), once took longer.
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "180")
    ray.init(
        # What the tests' replicas ask for at most at once (two of 0.5 CPU, or one engine
        # of 1), and no more than a 2-core machine has: Ray must not plan on cores that
        # are not there.
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024 * 1024,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
        log_to_driver=False,
        _metrics_export_port=metrics_port,
        _system_config={"metrics_report_interval_ms": 1000},
    )
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port, "request_timeout_s": None})
    try:
        yield RayServe(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        serve.shutdown()
        ray.shutdown()


def deploy(name: str, **settings: Any) -> None:
    """The server deployed as Serve application `name` at `/`; returns once it is ready.

    A fake chat engine comes with a fake embedding engine (the real one is vLLM's)."""
    if "engine_factory" in settings:
        settings.setdefault("embedding_engine_factory", FAKE_EMBEDDER)
    serve.run(build_app(settings), name=name, route_prefix="/")


@contextmanager
def deployed(name: str, **settings: Any) -> Iterator[None]:
    """The server deployed as Serve application `name` at `/` (ready on entry, deleted on exit)."""
    deploy(name, **settings)
    try:
        yield
    finally:
        serve.delete(name)


def replica_states(app: str) -> dict[str, int]:
    """How many replicas of the app's deployment are in each state (STARTING, RUNNING...)."""
    (deployment,) = serve.status().applications[app].deployments.values()
    states = deployment.replica_states.items()
    return {getattr(state, "value", state): int(count) for state, count in states}


def running_replicas(app: str) -> int:
    """Replicas of the app's deployment that Serve routes requests to."""
    return replica_states(app).get("RUNNING", 0)


def kill_replica(app: str, replica: str) -> None:
    """Kill a replica's actor as a crash would (Serve notices and replaces it)."""
    _kill(ray.get_actor(f"SERVE_REPLICA::{app}#OAIServer#{replica}", namespace="serve"))


def kill_deployment(app: str, deployment: str) -> None:
    """Kill every replica of one of the app's deployments, as a crash would."""
    prefix = f"SERVE_REPLICA::{app}#{deployment}#"
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
    doomed = [n for n in names if n.startswith(prefix)]
    assert doomed, names
    for name in doomed:
        _kill(ray.get_actor(name, namespace="serve"))


def _kill(actor: Any) -> None:
    """Kill `actor` and return once it is dead, as after a crash.

    `ray.kill` only asks: the actor dies a moment later. A request sent in that moment may
    be taken by it and then cut off mid-answer, which is not what these tests ask about.
    """
    ray.kill(actor, no_restart=True)
    wait_for(lambda: _dead(actor), 30, "a killed actor to die")


def _dead(actor: Any) -> bool:
    try:
        ray.get(actor.__ray_ready__.remote(), timeout=5)
    except RayActorError:
        return True
    except GetTimeoutError:
        pass  # dying, or busy
    return False


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def wait_for_replicas(url: str, count: int, timeout: float = 30) -> None:
    """Until the proxy routes to `count` different replicas (it learns of new ones late)."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=5) as client:
        while len(seen) < count:
            assert time.monotonic() < deadline, f"the proxy reached only {seen}"
            seen.add(client.get(f"{url}/health").headers["x-replica"])
