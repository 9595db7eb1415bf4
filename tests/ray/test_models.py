"""One replica holds every model of its settings, the embedding model too, and routes by
`model` as the plain server does (docs/models/index.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance import validating_client
from tests.ray.conftest import RayServe, deployed

SETTINGS = {
    "ray_min_replicas": 1,
    "ray_max_replicas": 1,
    "ray_num_cpus": 0.5,
    "model": ["first=org/first", "second=org/second"],
}


@pytest.fixture(scope="module")
def url(ray_serve: RayServe) -> Iterator[str]:
    with deployed("models", engine_factory="tests.ray.engines:one_fake_per_model", **SETTINGS):
        yield ray_serve.url


def test_a_replica_serves_each_model_it_lists(url: str) -> None:
    with validating_client(timeout=10) as http:
        listed = [m["id"] for m in http.get(f"{url}/v1/models").json()["data"]]
        assert listed == ["first", "second", "all-minilm-l6-v2"]
        for model in ("second", "first"):
            body = {"model": model, "messages": [{"role": "user", "content": "Who?"}]}
            answer = http.post(f"{url}/v1/chat/completions", json=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == f"I am {model}."
        body = {"model": "all-minilm-l6-v2", "input": ["one", "two"]}
        embedded = http.post(f"{url}/v1/embeddings", json=body)
        assert embedded.status_code == 200, embedded.text
        assert [len(item["embedding"]) for item in embedded.json()["data"]] == [8, 8]
        wrong = http.post(f"{url}/v1/embeddings", json={**body, "model": "first"})
        assert wrong.status_code == 400
        assert "'first'" in wrong.json()["error"]["message"]


def test_a_replica_reranks_on_its_embedding_model(url: str) -> None:
    documents = ["first text", "second text", "third"]
    with validating_client(timeout=10) as http:
        listed = {
            m["id"]: m["supported_tasks"] for m in http.get(f"{url}/v1/models").json()["data"]
        }
        assert listed["all-minilm-l6-v2"] == ["embed", "score"]
        body = {"model": "all-minilm-l6-v2", "query": "text", "documents": documents}
        ranked = http.post(f"{url}/v2/rerank", json=body)
        assert ranked.status_code == 200, ranked.text
        results = ranked.json()["results"]
        assert sorted(r["index"] for r in results) == [0, 1, 2]
        scores = [r["relevance_score"] for r in results]
        assert scores == sorted(scores, reverse=True)
        refused = http.post(f"{url}/v2/rerank", json={**body, "model": "first"})
        assert refused.status_code == 400
        assert "chat model" in refused.json()["error"]["message"]
