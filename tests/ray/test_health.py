"""Serve's health check asks the engines: a replica whose chat or embedding engine died is
replaced."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conformance import validating_client
from tests.ray.conftest import FAKE, RayServe, deployed
from tests.ray.streams import chat_body

EMBEDDING = "all-minilm-l6-v2"
SETTINGS = {"ray_min_replicas": 1, "ray_max_replicas": 1, "ray_num_cpus": 0.5}


@pytest.fixture
def url(ray_serve: RayServe) -> Iterator[str]:
    with deployed("dying", engine_factory="tests.ray.engines:dying_fake", **SETTINGS):
        yield ray_serve.url


def _replaced(url: str, http: httpx.Client, dead: str) -> None:
    """Until /health answers 200 from a replica other than `dead`. While none is up,
    Serve's proxy may hold a request until one is (a timeout here is "not yet")."""
    began = time.monotonic()
    while True:
        with contextlib.suppress(httpx.TimeoutException):
            health = http.get(f"{url}/health")
            if health.status_code == 200:
                break
        assert time.monotonic() - began < 60, "the dead replica was never replaced"
        time.sleep(0.5)
    assert health.headers["x-replica"] != dead


def test_a_replica_whose_engine_died_is_replaced(url: str) -> None:
    with validating_client(timeout=10) as http:
        failed = http.post(f"{url}/v1/chat/completions", json=chat_body(5, stream=False))
        assert failed.status_code == 503
        dead = failed.headers["x-replica"]
        assert http.get(f"{url}/health").status_code == 503
        _replaced(url, http, dead)
        answer = http.post(f"{url}/v1/chat/completions", json=chat_body(1, stream=False))
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == "Hello!"


def test_a_replica_whose_embedding_engine_died_is_replaced(ray_serve: RayServe) -> None:
    url = ray_serve.url
    factory = "tests.ray.engines:dying_embedder"
    with (
        deployed(
            "dying-embedder", engine_factory=FAKE, embedding_engine_factory=factory, **SETTINGS
        ),
        validating_client(timeout=10) as http,
    ):
        failed = http.post(f"{url}/v1/embeddings", json={"model": EMBEDDING, "input": "a"})
        assert failed.status_code == 503
        dead = failed.headers["x-replica"]
        assert http.get(f"{url}/health").status_code == 503
        _replaced(url, http, dead)
        answer = http.post(f"{url}/v1/chat/completions", json=chat_body(1, stream=False))
        assert answer.status_code == 200
