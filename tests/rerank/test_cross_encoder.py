"""Rerank and score on a cross-encoder (a one-label classifier), on the fake engines."""

from __future__ import annotations

import pytest

from oai_server.engine.fake.pooling import FakeEmbeddingEngine
from tests.embeddings.conftest import EMBEDDING, embedding_app

DOCUMENTS = ["the cat sat", "a dog ran", "cats purr"]


async def test_each_pair_is_one_engine_request_typed_as_a_pair() -> None:
    encoder = FakeEmbeddingEngine(labels=("LABEL_0",))
    async with embedding_app(encoder) as client:
        reply = await client.post(
            "/v1/rerank", json={"model": EMBEDDING, "query": "kit", "documents": DOCUMENTS}
        )
        # The query's tokens then each document's, one prompt per pair (one token per byte).
        pairs = [list(b"kit" + doc.encode()) for doc in DOCUMENTS]
        assert encoder.calls == pairs
        # Typed as a pair: the document's tokens begin after the query's 3.
        expected = [(await encoder.classify("x", pair, 3))[0] for pair in pairs]
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert {r["index"]: r["relevance_score"] for r in results} == pytest.approx(
        dict(enumerate(expected))
    )
    assert [r["relevance_score"] for r in results] == sorted(expected, reverse=True)


async def test_score_pairs_many_against_many_on_a_cross_encoder() -> None:
    encoder = FakeEmbeddingEngine(labels=("LABEL_0",))
    async with embedding_app(encoder) as client:
        reply = await client.post("/score", json={"text_1": ["ab", "c"], "text_2": ["d", "ef"]})
    assert reply.status_code == 200, reply.text
    assert encoder.calls == [list(b"abd"), list(b"cef")]
    assert reply.json()["usage"]["prompt_tokens"] == 6


async def test_truncation_cuts_the_whole_pair() -> None:
    encoder = FakeEmbeddingEngine(labels=("LABEL_0",))
    async with embedding_app(encoder) as client:
        long = await client.post(
            "/rerank",
            json={"query": "q", "documents": ["x" * 100], "truncate_prompt_tokens": 10},
        )
        refused = await client.post("/rerank", json={"query": "q", "documents": ["y", "x" * 64]})
    assert long.status_code == 200, long.text
    assert encoder.calls == [list(b"q" + b"x" * 9)]
    assert refused.json()["error"]["param"] == "documents[1]"


async def test_a_classifier_of_several_labels_does_not_rerank() -> None:
    async with embedding_app(FakeEmbeddingEngine(labels=("no", "yes"))) as client:
        reply = await client.post("/v1/rerank", json={"query": "q", "documents": ["a"]})
    assert reply.status_code == 400
    assert "classifier of 2 labels" in reply.json()["error"]["message"]


async def test_a_cross_encoder_asked_for_embeddings_says_what_it_serves() -> None:
    async with embedding_app(FakeEmbeddingEngine(labels=("LABEL_0",))) as client:
        reply = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": "a"})
    assert reply.status_code == 400
    assert "cross-encoder" in reply.json()["error"]["message"]


async def test_classify_gives_each_inputs_probabilities_and_its_likeliest_label() -> None:
    classifier = FakeEmbeddingEngine(labels=("negative", "neutral", "positive"))
    async with embedding_app(classifier, response_cache="memory") as client:
        reply = await client.post("/classify", json={"input": ["good", "bad"]})
        again = await client.post("/classify", json={"input": ["good", "bad"]})
        one = await client.post("/classify", json={"model": EMBEDDING, "input": "good"})
    assert reply.status_code == 200, reply.text
    data = reply.json()["data"]
    assert [d["index"] for d in data] == [0, 1]
    for item in data:
        assert item["num_classes"] == 3
        assert sum(item["probs"]) == pytest.approx(1.0)
        best = max(range(3), key=item["probs"].__getitem__)
        assert item["label"] == classifier.labels[best]
    assert data[0]["probs"] != data[1]["probs"]
    assert one.json()["data"][0]["probs"] == data[0]["probs"]
    assert reply.json()["usage"]["prompt_tokens"] == 7
    assert again.headers["x-cache"] == "hit"
    assert again.json()["data"] == data


async def test_classify_on_an_embedding_model_says_what_it_serves() -> None:
    async with embedding_app() as client:
        reply = await client.post("/classify", json={"input": "good"})
    assert reply.status_code == 400
    assert "is an embedding model" in reply.json()["error"]["message"]
