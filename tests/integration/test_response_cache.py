"""`--response-cache memory` on the real engines: a repeated greedy question is answered
from the cache, with the engine's text, streamed or not; repeated embeddings too."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from transformers import AutoTokenizer

from oai_server.models.embedded_embedding import locate_embedding_model
from tests.conformance import ValidatingTransport
from tests.integration.conftest import EMBEDDING_MODEL, MODEL, run_server

pytestmark = pytest.mark.integration

QUESTION = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "What is the capital of France?"}],
    "temperature": 0,
    "max_tokens": 16,
}


def _streamed_text(body: str) -> str:
    chunks = [json.loads(e.removeprefix("data: ")) for e in body.split("\n\n") if "{" in e]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_a_repeated_greedy_question_is_answered_from_the_cache(tmp_path: Path) -> None:
    with (
        run_server(
            tmp_path, "--response-cache", "memory", "--embedding-model", EMBEDDING_MODEL
        ) as server,
        httpx.Client(
            base_url=server.base_url, transport=ValidatingTransport(), timeout=120
        ) as http,
    ):
        first = http.post("/chat/completions", json=QUESTION)
        second = http.post("/chat/completions", json=QUESTION)
        streamed = http.post("/chat/completions", json={**QUESTION, "stream": True})
        assert [r.status_code for r in (first, second, streamed)] == [200] * 3
        assert [r.headers["x-cache"] for r in (first, second, streamed)] == ["miss", "hit", "hit"]
        text = first.json()["choices"][0]["message"]["content"]
        assert text
        assert second.json()["choices"][0]["message"]["content"] == text
        assert _streamed_text(streamed.text) == text
        usage, replayed = first.json()["usage"], second.json()["usage"]
        assert replayed["prompt_tokens"] == usage["prompt_tokens"]
        assert replayed["completion_tokens"] == usage["completion_tokens"]
        assert replayed["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"]
        texts = ["cached text", "another"]
        embed = {"model": EMBEDDING_MODEL, "input": texts}
        embedded = [http.post("/embeddings", json=embed) for _ in range(2)]
        assert [r.headers["x-cache"] for r in embedded] == ["miss", "hit"]
        assert embedded[1].json() == embedded[0].json()
        assert len(embedded[0].json()["data"][0]["embedding"]) == 384
        # The key is the real tokenizer's ids: the same texts sent as their token ids are
        # the same entry, with the same usage (the model's tokens, not the text's bytes).
        tokenizer = AutoTokenizer.from_pretrained(locate_embedding_model())
        ids = [tokenizer.encode(text) for text in texts]
        as_ids = http.post("/embeddings", json={**embed, "input": ids})
        assert as_ids.headers["x-cache"] == "hit"
        assert as_ids.json() == embedded[0].json()
        tokens = sum(map(len, ids))
        assert as_ids.json()["usage"]["prompt_tokens"] == tokens
        assert tokens < sum(map(len, texts))  # fewer than the bytes (the fake's ids)
        # A text the tokenizer reads differently is another entry, not a collision (not a
        # change of case: this model's tokenizer lowercases, so "Cached" is "cached" to it).
        other = http.post("/embeddings", json={**embed, "input": ["cached texts", "another"]})
        assert other.headers["x-cache"] == "miss"
        metrics = httpx.get(f"{server.root}/metrics", timeout=10).text
        assert "oai_cache_hits_total 4.0" in metrics
        assert "oai_cache_misses_total 3.0" in metrics
