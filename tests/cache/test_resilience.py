"""Concurrency, bounds and failures: coalescing, eviction, bad entries, Redis going away."""

from __future__ import annotations

import asyncio
import time

import redis

from benchmarks.fixtures.redis_server import RedisServer
from oai_server.cache.memory import MemoryBackend
from oai_server.cache.redis_backend import CLAIM_PREFIX, KEY_PREFIX
from oai_server.engine.fake import FakeEngine
from tests.cache.conftest import Cached, cached, chat_body, chat_text, sse_chunks, until

CHAT = "/v1/chat/completions"


async def test_ten_identical_requests_at_once_run_the_engine_once(backend: str) -> None:
    engine = FakeEngine(token_delay=0.01)
    async with cached(engine, backend) as c:
        whole = await asyncio.gather(*(c.post(CHAT, chat_body()) for _ in range(10)))
        assert len(engine.calls) == 1
        assert sorted(r.headers["x-cache"] for r in whole) == ["hit"] * 9 + ["miss"]
        assert {r.json()["choices"][0]["message"]["content"] for r in whole} == {engine.reply}
        assert await c.metric("oai_cache_coalesced_total") == 9

        body = chat_body(stream=True, max_tokens=5)
        streams = await asyncio.gather(*(c.post(CHAT, body) for _ in range(10)))
        assert len(engine.calls) == 2
        texts = {chat_text(sse_chunks(r)) for r in streams}
        assert texts == {"Hello! How can I help"}


async def test_followers_run_the_engine_when_the_leader_fails(backend: str) -> None:
    engine = FakeEngine(token_delay=0.01, finish_reason="error")
    async with cached(engine, backend) as c:
        responses = await asyncio.gather(*(c.client.post(CHAT, json=chat_body()) for _ in range(3)))
        assert {r.status_code for r in responses} == {500}
        assert len(engine.calls) == 3  # each waited for the leader, then tried itself


async def test_the_memory_cache_evicts_the_least_recently_used_within_its_bytes() -> None:
    engine = FakeEngine()
    async with cached(engine, "memory", response_cache_max_bytes=400) as c:
        assert isinstance(c.cache.backend, MemoryBackend)
        # About 170 bytes an entry: two fit. 3 is used again, so 4 is the least recently used.
        for tokens in (3, 4, 3, 5):
            await c.post(CHAT, chat_body(max_tokens=tokens))
        held = await c.metric("oai_cache_bytes")
        assert 0 < held <= 400
        assert await c.metric("oai_cache_evictions_total") >= 1
        assert (await c.post(CHAT, chat_body(max_tokens=5))).headers["x-cache"] == "hit"
        assert (await c.post(CHAT, chat_body(max_tokens=4))).headers["x-cache"] == "miss"


async def _corrupt_every_entry(c: Cached, backend: str) -> None:
    if isinstance(c.cache.backend, MemoryBackend):
        for key in list(c.cache.backend._entries):
            await c.cache.backend.set(key, b'{"format": 1, "events": [{"bad": 1}]')
        return
    with redis.Redis.from_url(backend) as client:
        for key in client.keys(KEY_PREFIX + "*"):
            client.set(key, b"\x00not json")


async def test_an_entry_that_does_not_decode_is_a_miss(backend: str) -> None:
    engine = FakeEngine()
    async with cached(engine, backend) as c:
        await c.post(CHAT, chat_body())
        await _corrupt_every_entry(c, backend)
        again = await c.post(CHAT, chat_body(stream=True))
        assert again.headers["x-cache"] == "miss"
        assert chat_text(sse_chunks(again)) == engine.reply
        assert await c.metric("oai_cache_backend_errors_total") == 1
        assert (await c.post(CHAT, chat_body())).headers["x-cache"] == "hit"


async def _until_redis_is_back(c: Cached) -> None:
    """Until the breaker's probe finds Redis again (it probes every 0.5 s while it is down)."""
    deadline = time.monotonic() + 10
    # The cache's own Redis (no --redis-url) is the dependency `response_cache`.
    while await c.metric('oai_dependency_up{dependency="response_cache"}') != 1.0:
        assert time.monotonic() < deadline, "Redis never came back"
        await asyncio.sleep(0.02)


async def test_redis_killed_and_restarted_never_fails_a_request(
    redis_server: RedisServer,
) -> None:
    redis_server.flush()
    engine = FakeEngine()
    async with cached(engine, redis_server.url) as c:
        await c.post(CHAT, chat_body())
        assert (await c.post(CHAT, chat_body())).headers["x-cache"] == "hit"
        redis_server.stop()
        try:
            for _ in range(3):
                down = await c.post(CHAT, chat_body())
                assert down.headers["x-cache"] == "miss"
                assert down.json()["choices"][0]["message"]["content"] == engine.reply
            assert await c.metric("oai_cache_backend_errors_total") >= 1
        finally:
            redis_server.start()
        await _until_redis_is_back(c)
        assert (await c.post(CHAT, chat_body())).headers["x-cache"] == "miss"  # Redis is empty
        assert (await c.post(CHAT, chat_body())).headers["x-cache"] == "hit"


async def test_a_hanging_redis_costs_a_short_deadline_not_a_failure(
    redis_server: RedisServer,
) -> None:
    redis_server.flush()
    engine = FakeEngine()
    async with cached(engine, redis_server.url) as c:
        await c.post(CHAT, chat_body())
        redis_server.freeze()
        try:
            began = time.monotonic()
            slow = await c.post(CHAT, chat_body())
            # One command deadline (0.5 s), then Redis is marked down and not asked.
            assert time.monotonic() - began < 1.5
            assert slow.headers["x-cache"] == "miss"
            assert await c.metric("oai_cache_backend_errors_total") >= 1
        finally:
            redis_server.thaw()
        await _until_redis_is_back(c)
        assert (await c.post(CHAT, chat_body())).headers["x-cache"] == "hit"


async def test_replicas_sharing_redis_run_the_engine_once(redis_server: RedisServer) -> None:
    redis_server.flush()
    first, second = FakeEngine(token_delay=0.02), FakeEngine(token_delay=0.02)
    async with cached(first, redis_server.url) as a, cached(second, redis_server.url) as b:
        leader = asyncio.create_task(a.post(CHAT, chat_body()))
        # It claims the answer before it asks its engine.
        await until(lambda: first.calls, "the first replica asks its engine")
        others = await asyncio.gather(
            *(b.post(CHAT, chat_body(stream=True)) for _ in range(3)),
            *(a.post(CHAT, chat_body()) for _ in range(2)),
        )
        answered = await leader
        assert len(first.calls) + len(second.calls) == 1
        assert answered.headers["x-cache"] == "miss"
        assert [r.headers["x-cache"] for r in others] == ["hit"] * 5
        assert {chat_text(sse_chunks(r)) for r in others[:3]} == {first.reply}
        assert await b.metric("oai_cache_coalesced_total") == 3
    with redis.Redis.from_url(redis_server.url) as client:
        assert client.keys(CLAIM_PREFIX + "*") == []  # the claim went with the answer


async def test_a_replica_that_gives_up_leaves_the_answer_to_the_others(
    redis_server: RedisServer,
) -> None:
    redis_server.flush()
    failing = FakeEngine(token_delay=0.02, finish_reason="error")
    second = FakeEngine()
    async with cached(failing, redis_server.url) as a, cached(second, redis_server.url) as b:
        leader = asyncio.create_task(a.client.post(CHAT, json=chat_body()))
        await until(lambda: failing.calls, "the first replica asks its engine")
        waited = await b.post(CHAT, chat_body())
        assert (await leader).status_code == 500
        assert waited.headers["x-cache"] == "miss"
        assert waited.json()["choices"][0]["message"]["content"] == second.reply
