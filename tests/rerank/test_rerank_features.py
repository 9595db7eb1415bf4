"""Rerank and score like every other endpoint: the response cache, the Batch API, the
token limits, usage and metrics, on the fake engines."""

from __future__ import annotations

import asyncio
import io
import json
import time
from pathlib import Path
from typing import Any

from oai_server.engine.fake.engine import FakeTokenizer
from oai_server.engine.fake.pooling import FakeEmbeddingEngine
from tests.batch.helpers import TERMINAL, jsonl
from tests.embeddings.conftest import EMBEDDING, embedding_app, sdk

RERANK = {"model": EMBEDDING, "query": "q", "documents": ["alpha", "beta", "gamma"]}
SCORE = {"model": EMBEDDING, "text_1": "q", "text_2": ["alpha", "beta"]}


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name):
            total += float(line.split()[-1])
    return total


async def test_a_repeated_rerank_is_scored_once_and_a_hit_keeps_its_own_texts() -> None:
    embedder = FakeEmbeddingEngine()
    async with embedding_app(embedder, response_cache="memory") as client:
        miss = await client.post("/v1/rerank", json=RERANK)
        hit = await client.post("/v2/rerank", json=RERANK)
        # Another top_n, or the other shape, is another answer.
        cut = await client.post("/v1/rerank", json={**RERANK, "top_n": 1})
        score = await client.post("/v1/score", json=SCORE)
        score_hit = await client.post("/score", json=SCORE)
    assert [r.headers["x-cache"] for r in (miss, hit, cut, score, score_hit)] == [
        "miss",
        "hit",
        "miss",
        "miss",
        "hit",
    ]
    assert hit.json()["results"] == miss.json()["results"]
    assert hit.json()["usage"] == miss.json()["usage"]
    assert hit.json()["id"] != miss.json()["id"]
    assert score_hit.json()["data"] == score.json()["data"]
    assert len(embedder.calls) == 4 + 4 + 3


class Uncased(FakeTokenizer):
    """An uncased model's tokenizer (as all-MiniLM-L6-v2's): "ALPHA" and "alpha" are one."""

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return super().encode(text.lower(), add_special_tokens=add_special_tokens)


async def test_an_uncased_hit_returns_the_documents_as_this_request_wrote_them() -> None:
    embedder = FakeEmbeddingEngine(_tokenizer=Uncased())
    async with embedding_app(embedder, response_cache="memory") as client:
        miss = await client.post("/v1/rerank", json=RERANK)
        shouted = {**RERANK, "documents": ["ALPHA", "beta", "Gamma"]}
        hit = await client.post("/v1/rerank", json=shouted)
    assert hit.headers["x-cache"] == "hit"
    scores = [(r["index"], r["relevance_score"]) for r in hit.json()["results"]]
    assert scores == [(r["index"], r["relevance_score"]) for r in miss.json()["results"]]
    texts = {r["index"]: r["document"]["text"] for r in hit.json()["results"]}
    assert texts == {0: "ALPHA", 1: "beta", 2: "Gamma"}


async def test_rerank_and_score_lines_answer_as_the_live_endpoints(tmp_path: Path) -> None:
    async with embedding_app(store_url=f"sqlite:///{tmp_path / 'store.db'}") as http:
        client = sdk(http)
        for url, body in (("/v1/rerank", RERANK), ("/v1/score", SCORE)):
            line = {"custom_id": "x", "method": "POST", "url": url, "body": body}
            uploaded = await client.files.create(
                file=("input.jsonl", io.BytesIO(jsonl([line]))), purpose="batch"
            )
            batch = await client.batches.create(
                input_file_id=uploaded.id,
                endpoint=url,  # type: ignore[arg-type]
                completion_window="24h",
            )
            deadline = time.monotonic() + 30
            while (batch := await client.batches.retrieve(batch.id)).status not in TERMINAL:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert batch.status == "completed", batch.errors
            assert batch.output_file_id is not None
            [raw] = (await client.files.content(batch.output_file_id)).text.splitlines()
            answered = json.loads(raw)["response"]
            live = (await http.post(url, json=body)).json()
            assert answered["status_code"] == 200
            # The same answer but for its own id and time.
            for varying in ("id", "created"):
                answered["body"].pop(varying, None)
                live.pop(varying, None)
            assert answered["body"] == live
            answers = live["results"] if url == "/v1/rerank" else live["data"]
            assert len(answers) == len(body["documents" if url == "/v1/rerank" else "text_2"])


async def test_score_tokens_count_against_the_token_limit_and_in_usage() -> None:
    limits: dict[str, Any] = {"rate_limit_tpm": 20, "rate_limit_window": 1e9}
    async with embedding_app(**limits) as client:
        # 1 + 5 + 4 + 5 tokens (one per byte).
        first = await client.post("/v1/rerank", json=RERANK)
        refused = await client.post("/v1/rerank", json=RERANK)
        metrics = (await client.get("/metrics")).text
    assert first.status_code == 200
    assert first.headers["x-ratelimit-remaining-tokens"] == str(20 - 15)
    assert refused.status_code == 429, refused.text
    assert metric(metrics, "oai_score_pairs_total") == 3
    usage = [
        line
        for line in metrics.splitlines()
        if line.startswith("oai_usage_tokens_total") and 'type="input"' in line
    ]
    assert usage
    assert metric("\n".join(usage), "oai_usage_tokens_total") == 15


async def test_texts_past_the_request_token_bound_are_refused() -> None:
    async with embedding_app(max_request_tokens=10) as client:
        reply = await client.post("/v1/rerank", json=RERANK)
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "request_too_large"
