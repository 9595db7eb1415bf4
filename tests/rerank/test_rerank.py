"""Rerank and score on the embedding model, through raw HTTP, on the fake engines."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.fake.pooling import FakeEmbeddingEngine
from oai_server.settings import Settings
from tests.embeddings.conftest import CHAT, EMBEDDING, embedding_app

DOCUMENTS = ["the cat sat", "a dog ran", "stocks fell", "cats purr"]


def cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


async def vectors(client: httpx.AsyncClient, texts: list[str]) -> list[list[float]]:
    reply = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": texts})
    return [item["embedding"] for item in reply.json()["data"]]


async def post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    return await client.post(path, json={"model": EMBEDDING, **body})


@pytest.mark.parametrize("path", ["/v1/rerank", "/rerank", "/v2/rerank"])
async def test_rerank_orders_documents_by_the_cosine_of_their_embeddings(path: str) -> None:
    async with embedding_app() as client:
        reply = await post(client, path, {"query": "kittens", "documents": DOCUMENTS})
        query, *docs = await vectors(client, ["kittens", *DOCUMENTS])
    assert reply.status_code == 200, reply.text
    body = reply.json()
    expected = sorted(((i, cosine(query, doc)) for i, doc in enumerate(docs)), key=lambda p: -p[1])
    assert [r["index"] for r in body["results"]] == [i for i, _ in expected]
    for result, (_, score) in zip(body["results"], expected, strict=True):
        assert result["relevance_score"] == pytest.approx(score, abs=1e-6)
        assert result["document"] == {"text": DOCUMENTS[result["index"]]}
    assert body["model"] == EMBEDDING
    assert body["id"].startswith("score-")
    # The fake tokenizer: one token per byte; the query counts once.
    tokens = len("kittens") + sum(len(d) for d in DOCUMENTS)
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}


async def test_the_query_is_embedded_once_and_every_document_at_once() -> None:
    embedder = FakeEmbeddingEngine()
    async with embedding_app(embedder) as client:
        reply = await post(client, "/rerank", {"query": "q", "documents": DOCUMENTS * 50})
    assert reply.status_code == 200
    assert len(embedder.calls) == 1 + 200
    assert sorted(r["index"] for r in reply.json()["results"]) == list(range(200))


@pytest.mark.parametrize(("top_n", "count"), [(0, 4), (2, 2), (4, 4), (100, 4)])
async def test_top_n_keeps_the_best_n_and_0_or_more_than_there_are_keeps_all(
    top_n: int, count: int
) -> None:
    async with embedding_app() as client:
        whole = await post(client, "/v2/rerank", {"query": "q", "documents": DOCUMENTS})
        cut = await post(
            client, "/v2/rerank", {"query": "q", "documents": DOCUMENTS, "top_n": top_n}
        )
    assert cut.json()["results"] == whole.json()["results"][:count]


async def test_return_documents_false_leaves_the_texts_out() -> None:
    async with embedding_app() as client:
        reply = await post(
            client, "/v1/rerank", {"query": "q", "documents": DOCUMENTS, "return_documents": False}
        )
    assert all(set(r) == {"index", "relevance_score"} for r in reply.json()["results"])


async def test_document_objects_are_read_as_their_text() -> None:
    async with embedding_app() as client:
        plain = await post(client, "/rerank", {"query": "q", "documents": ["ab", "cd"]})
        objects = await post(
            client,
            "/rerank",
            {
                "query": {"text": "q"},
                "documents": [{"text": "ab"}, {"content": [{"type": "text", "text": "cd"}]}],
            },
        )
    assert objects.status_code == 200, objects.text
    assert objects.json()["results"] == plain.json()["results"]


def error_of(reply: httpx.Response) -> dict[str, Any]:
    assert reply.status_code == 400, reply.text
    error: dict[str, Any] = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"query": "q", "documents": []}, "documents", "empty"),
        ({"query": "q", "documents": ["a", ""]}, "documents[1]", "empty string"),
        ({"query": "", "documents": ["a"]}, "query", "empty string"),
        ({"query": "q", "documents": ["a", "x" * 65]}, "documents[1]", "65 tokens"),
        ({"query": "q", "documents": ["a"], "truncate_prompt_tokens": 65}, None, "context"),
    ],
)
async def test_bad_input_is_a_400_naming_the_text(
    body: dict[str, Any], param: str | None, words: str
) -> None:
    async with embedding_app() as client:  # the fake model's context: 64 tokens
        error = error_of(await post(client, "/v1/rerank", body))
    assert error["param"] == (param or "truncate_prompt_tokens")
    assert words in error["message"]


async def test_negative_top_n_is_refused() -> None:
    async with embedding_app() as client:
        reply = await post(client, "/v1/rerank", {"query": "q", "documents": ["a"], "top_n": -1})
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "top_n"


@pytest.mark.parametrize("side", ["left", "right"])
async def test_truncate_prompt_tokens_cuts_a_long_document_instead(side: str) -> None:
    long = "a" * 30 + "b" * 70
    kept = "a" * 30 + "b" * 10 if side == "right" else "b" * 40
    async with embedding_app() as client:
        reply = await post(
            client,
            "/v1/rerank",
            {
                "query": "q",
                "documents": [long],
                "truncate_prompt_tokens": 40,
                "truncation_side": side,
            },
        )
        same = await post(client, "/v1/rerank", {"query": "q", "documents": [kept]})
    assert reply.status_code == 200, reply.text
    assert reply.json()["results"][0]["relevance_score"] == pytest.approx(
        same.json()["results"][0]["relevance_score"]
    )
    assert reply.json()["results"][0]["document"]["text"] == long
    assert reply.json()["usage"]["prompt_tokens"] == 1 + 40


async def test_more_documents_than_the_bound_are_refused() -> None:
    async with embedding_app(max_score_documents=10) as client:
        error = error_of(await post(client, "/v1/rerank", {"query": "q", "documents": ["a"] * 11}))
        fits = await post(client, "/v1/rerank", {"query": "q", "documents": ["a"] * 10})
    assert error["code"] == "request_too_large"
    assert "--max-score-documents" in error["message"]
    assert fits.status_code == 200


async def test_a_chat_model_asked_to_rerank_is_told_what_it_is() -> None:
    async with embedding_app() as client:
        reply = await client.post(
            "/v1/rerank", json={"model": CHAT, "query": "q", "documents": ["a"]}
        )
    error = error_of(reply)
    assert error["param"] == "model"
    assert f"'{CHAT}' is a chat model" in error["message"]
    assert f"use '{EMBEDDING}'" in error["message"]


async def test_without_an_embedding_model_rerank_says_so() -> None:
    app = create_app(Settings(embedding_model="none"), FakeEngine())
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client,
    ):
        unnamed = await client.post("/v1/rerank", json={"query": "q", "documents": ["a"]})
        named = await client.post("/v1/score", json={"model": CHAT, "text_1": "q", "text_2": ["a"]})
    assert "serves no embedding model" in error_of(unnamed)["message"]
    assert f"'{CHAT}' is a chat model" in error_of(named)["message"]


@pytest.mark.parametrize(
    ("first", "second"), [("text_1", "text_2"), ("queries", "documents"), ("data_1", "data_2")]
)
async def test_score_one_against_many_in_input_order(first: str, second: str) -> None:
    async with embedding_app() as client:
        reply = await post(client, "/v1/score", {first: "kittens", second: DOCUMENTS})
        query, *docs = await vectors(client, ["kittens", *DOCUMENTS])
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["object"] == "list"
    assert [d["index"] for d in body["data"]] == [0, 1, 2, 3]
    assert all(d["object"] == "score" for d in body["data"])
    for item, doc in zip(body["data"], docs, strict=True):
        assert item["score"] == pytest.approx(cosine(query, doc), abs=1e-6)


async def test_score_pairs_many_against_many() -> None:
    async with embedding_app() as client:
        reply = await post(client, "/score", {"text_1": ["a", "b"], "text_2": ["c", "d"]})
        a, b, c, d = await vectors(client, ["a", "b", "c", "d"])
        uneven = await post(client, "/score", {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]})
    scores = [item["score"] for item in reply.json()["data"]]
    assert scores == pytest.approx([cosine(a, c), cosine(b, d)], abs=1e-6)
    assert error_of(uneven)["param"] == "text_1"


async def test_a_score_request_without_its_second_side_is_refused() -> None:
    async with embedding_app() as client:
        reply = await post(client, "/score", {"text_1": "a"})
    assert reply.status_code == 400
    assert "text_2" in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("embedder", "pooled"),
    [(FakeEmbeddingEngine(), "embed"), (FakeEmbeddingEngine(labels=("LABEL_0",)), "classify")],
)
async def test_the_model_list_says_what_each_model_serves(
    embedder: FakeEmbeddingEngine, pooled: str
) -> None:
    async with embedding_app(embedder) as client:
        listed = (await client.get("/v1/models")).json()["data"]
        one = (await client.get(f"/v1/models/{EMBEDDING}")).json()
    tasks = {model["id"]: model["supported_tasks"] for model in listed}
    assert tasks == {CHAT: ["generate"], EMBEDDING: [pooled, "score"]}
    assert one["supported_tasks"] == [pooled, "score"]
