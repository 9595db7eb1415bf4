"""`/v1/embeddings` through the response cache, on the fake engines and each backend."""

from __future__ import annotations

from typing import Any

from oai_server.engine.fake import FakeEngine
from oai_server.engine.fake.pooling import FakeEmbeddingEngine
from tests.cache.conftest import cached

EMBEDDINGS = "/v1/embeddings"
MODEL = "all-minilm-l6-v2"


def body(**overrides: Any) -> dict[str, Any]:
    return {"model": MODEL, "input": ["alpha", "beta"], **overrides}


async def test_a_repeated_request_is_embedded_once_and_counted_as_a_hit(backend: str) -> None:
    embedder = FakeEmbeddingEngine()
    async with cached(FakeEngine(), backend, embedder) as c:
        miss = await c.post(EMBEDDINGS, body())
        hit = await c.post(EMBEDDINGS, body())
        assert (miss.headers["x-cache"], hit.headers["x-cache"]) == ("miss", "hit")
        # The very same floats and counts: JSON keeps every float32 exactly.
        assert hit.json() == miss.json()
        assert len(embedder.calls) == 2  # the two inputs of the miss, nothing for the hit
        assert await c.metric("oai_cache_hits_total") == 1
        assert await c.metric("oai_cache_misses_total") == 1


async def test_the_key_covers_inputs_encoding_and_dimensions(backend: str) -> None:
    embedder = FakeEmbeddingEngine(matryoshka=True)
    async with cached(FakeEngine(), backend, embedder) as c:
        await c.post(EMBEDDINGS, body())
        misses = [
            body(input=["alpha", "gamma"]),
            body(input=["beta", "alpha"]),
            body(encoding_format="base64"),
            body(dimensions=4),
        ]
        for changed in misses:
            response = await c.post(EMBEDDINGS, changed)
            assert response.headers["x-cache"] == "miss", changed
        # A text and its token ids are one input (the fake tokenizer: one token per byte).
        as_ids = await c.post(EMBEDDINGS, body(input=[list(b"alpha"), list(b"beta")]))
        base64_hit = await c.post(EMBEDDINGS, body(encoding_format="base64"))
        short_hit = await c.post(EMBEDDINGS, body(dimensions=4))
        assert [r.headers["x-cache"] for r in (as_ids, base64_hit, short_hit)] == ["hit"] * 3
        assert isinstance(base64_hit.json()["data"][0]["embedding"], str)
        assert len(short_hit.json()["data"][0]["embedding"]) == 4


async def test_a_hit_spends_none_of_the_token_limit(backend: str) -> None:
    # Windows are aligned to the clock: one of 10^9 s cannot end between the requests
    # (the default minute's could, and the hit would see a fresh budget).
    limits: dict[str, Any] = {"rate_limit_tpm": 12, "rate_limit_window": 1e9}
    async with cached(FakeEngine(), backend, FakeEmbeddingEngine(), **limits) as c:
        miss = await c.post(EMBEDDINGS, body(input="x" * 10))
        hit = await c.post(EMBEDDINGS, body(input="x" * 10))
        assert hit.headers["x-cache"] == "hit"
        assert hit.json()["usage"] == {"prompt_tokens": 10, "total_tokens": 10}
        assert miss.headers["x-ratelimit-remaining-tokens"] == "2"
        assert hit.headers["x-ratelimit-remaining-tokens"] == "2"
        # The two tokens left still pay for a new input.
        assert (await c.post(EMBEDDINGS, body(input="yy"))).headers["x-cache"] == "miss"


async def test_entries_are_scoped_per_api_key_and_cache_control_opts_out(backend: str) -> None:
    embedder = FakeEmbeddingEngine()
    async with cached(FakeEngine(), backend, embedder, api_key=["alice-key", "bob-key"]) as c:
        alice, bob = {"Authorization": "Bearer alice-key"}, {"Authorization": "Bearer bob-key"}
        await c.post(EMBEDDINGS, body(), **alice)
        seen = [await c.post(EMBEDDINGS, body(), **bob), await c.post(EMBEDDINGS, body(), **alice)]
        assert [r.headers["x-cache"] for r in seen] == ["miss", "hit"]
        fresh = await c.post(EMBEDDINGS, body(), **alice, **{"Cache-Control": "no-store"})
        assert fresh.headers["x-cache"] == "miss"
        assert len(embedder.calls) == 6
