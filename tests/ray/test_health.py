"""Serve's health check asks the engine: a replica whose engine died is replaced."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.conformance import validating_client
from tests.ray.conftest import RayServe, deployed
from tests.ray.streams import chat_body

SETTINGS = {"ray_min_replicas": 1, "ray_max_replicas": 1, "ray_num_cpus": 0.5}


@pytest.fixture(scope="module")
def url(ray_serve: RayServe) -> Iterator[str]:
    with deployed("dying", engine_factory="tests.ray.engines:dying_fake", **SETTINGS):
        yield ray_serve.url


def test_a_replica_whose_engine_died_is_replaced(url: str) -> None:
    with validating_client(timeout=10) as http:
        failed = http.post(f"{url}/v1/chat/completions", json=chat_body(5, stream=False))
        assert failed.status_code == 503
        dead = failed.headers["x-replica"]
        assert http.get(f"{url}/health").status_code == 503

        began = time.monotonic()
        while True:
            health = http.get(f"{url}/health")
            if health.status_code == 200:
                break
            assert time.monotonic() - began < 30, "the dead replica was never replaced"
            time.sleep(0.5)
        assert health.headers["x-replica"] != dead
        answer = http.post(f"{url}/v1/chat/completions", json=chat_body(1, stream=False))
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == "Hello!"
