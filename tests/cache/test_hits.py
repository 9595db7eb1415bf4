"""What is answered from the cache, and how a hit looks: both backends, the same suite."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from oai_server.engine.fake import FakeEngine
from tests.cache.conftest import (
    cached,
    chat_body,
    chat_text,
    completion_body,
    sse_chunks,
    without_identity,
)

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


async def test_a_repeated_greedy_question_is_answered_once(backend: str) -> None:
    engine = FakeEngine()
    async with cached(engine, backend) as c:
        first = await c.post(CHAT, chat_body())
        second = await c.post(CHAT, chat_body())
        assert (first.headers["x-cache"], second.headers["x-cache"]) == ("miss", "hit")
        assert len(engine.calls) == 1
        a, b = first.json(), second.json()
        assert a["choices"] == b["choices"]
        # The original counts, the whole prompt reported as cached.
        assert a["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert b["usage"] == {
            **a["usage"],
            "prompt_tokens_details": {**a["usage"]["prompt_tokens_details"], "cached_tokens": 24},
        }
        assert a["id"] != b["id"]
        assert b["id"].startswith("chatcmpl-")
        assert await c.metric("oai_cache_hits_total") == 1
        assert await c.metric("oai_cache_misses_total") == 1


async def test_sampling_without_a_seed_is_never_cached_with_a_seed_it_is(backend: str) -> None:
    engine = FakeEngine()
    async with cached(engine, backend) as c:
        for _ in range(2):
            response = await c.post(CHAT, chat_body(temperature=0.7))
            assert "x-cache" not in response.headers
        assert len(engine.calls) == 2
        seeded = [await c.post(CHAT, chat_body(temperature=0.7, seed=7)) for _ in range(2)]
        assert [r.headers["x-cache"] for r in seeded] == ["miss", "hit"]
        assert len(engine.calls) == 3


CHANGES: list[dict[str, Any]] = [
    {"messages": [{"role": "user", "content": "Hi!"}]},
    {"max_tokens": 15},
    {"stop": ["help"]},
    {"top_p": 0.5},
    {"presence_penalty": 0.5},
    {"seed": 1},
    {"n": 2},
    {"logprobs": True},
    {"logprobs": True, "top_logprobs": 2},
    {"response_format": {"type": "json_object"}},
    {"logit_bias": {"72": 5}},
    {
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "tool_choice": "none",
    },
]


async def test_any_change_that_shapes_the_answer_misses(backend: str) -> None:
    engine = FakeEngine()
    async with cached(engine, backend) as c:
        await c.post(CHAT, chat_body())
        for change in CHANGES:
            response = await c.post(CHAT, chat_body(**change))
            assert response.headers["x-cache"] == "miss", change
        assert len(engine.calls) == 1 + len(CHANGES)
        completion = await c.post(COMPLETIONS, completion_body(prompt="<|user|>Hi\n<|assistant|>"))
        assert completion.headers["x-cache"] == "miss"  # same tokens, another endpoint


async def test_two_spellings_of_one_request_share_an_entry(backend: str) -> None:
    engine = FakeEngine()
    async with cached(engine, backend) as c:
        await c.post(CHAT, chat_body())
        spelled = {
            "max_tokens": 16,
            "temperature": 0.0,
            "top_p": 1,
            "n": 1,
            "messages": [{"content": [{"type": "text", "text": "Hi"}], "role": "user"}],
            "model": chat_body()["model"],
            "user": "someone",
        }
        assert (await c.post(CHAT, spelled)).headers["x-cache"] == "hit"
        assert len(engine.calls) == 1


@pytest.mark.parametrize("usage", [False, True])
async def test_a_streamed_hit_replays_the_chunks_of_the_miss(backend: str, usage: bool) -> None:
    engine = FakeEngine()
    body = chat_body(stream=True, stream_options={"include_usage": True} if usage else None)
    async with cached(engine, backend) as c:
        miss, hit = [await c.post(CHAT, body) for _ in range(2)]
        assert (miss.headers["x-cache"], hit.headers["x-cache"]) == ("miss", "hit")
        assert hit.headers["content-type"].startswith("text/event-stream")
        live, replayed = sse_chunks(miss), sse_chunks(hit)
        if usage:
            details = replayed[-1]["usage"]["prompt_tokens_details"]
            assert details["cached_tokens"] == replayed[-1]["usage"]["prompt_tokens"]
            details["cached_tokens"] = 0  # the one difference: the prompt came from the cache
        assert without_identity(replayed) == without_identity(live)
        assert len(replayed) == len(engine.tokens or engine.reply.split()) + 2 + usage
        assert len({c["id"] for c in replayed}) == 1
        assert replayed[0]["id"] != live[0]["id"]
        assert chat_text(replayed) == engine.reply
        if usage:
            assert replayed[-1]["choices"] == []
            assert replayed[-1]["usage"]["total_tokens"] > 0
            assert all(chunk["usage"] is None for chunk in replayed[:-1])
        else:
            assert all("usage" not in chunk for chunk in replayed)


async def test_streamed_and_whole_requests_fill_entries_for_each_other(backend: str) -> None:
    engine = FakeEngine()
    async with cached(engine, backend) as c:
        whole = (await c.post(CHAT, chat_body())).json()
        streamed = await c.post(CHAT, chat_body(stream=True))
        assert streamed.headers["x-cache"] == "hit"
        chunks = sse_chunks(streamed)
        assert chat_text(chunks) == whole["choices"][0]["message"]["content"]
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"

        live = sse_chunks(await c.post(CHAT, chat_body(stream=True, max_tokens=3)))
        assembled = await c.post(CHAT, chat_body(max_tokens=3))
        assert assembled.headers["x-cache"] == "hit"
        answer = assembled.json()
        assert answer["choices"][0]["message"]["content"] == chat_text(live)
        assert answer["choices"][0]["finish_reason"] == "length"
        assert answer["usage"]["completion_tokens"] == 3
        assert answer["usage"]["prompt_tokens"] == 24
        assert len(engine.calls) == 2


async def test_text_completions_replay_with_logprobs_and_echo(backend: str) -> None:
    engine = FakeEngine()
    body = completion_body(logprobs=1, echo=True, max_tokens=4)
    async with cached(engine, backend) as c:
        miss = await c.post(COMPLETIONS, {**body, "stream": True})
        hit = await c.post(COMPLETIONS, {**body, "stream": True})
        assert without_identity(sse_chunks(hit)) == without_identity(sse_chunks(miss))
        whole = await c.post(COMPLETIONS, body)
        assert whole.headers["x-cache"] == "hit"
        assert whole.json()["choices"][0]["text"] == "Once" + "".join(
            chunk["choices"][0]["text"] for chunk in sse_chunks(miss)
        ).removeprefix("Once")
        best = [await c.post(COMPLETIONS, completion_body(best_of=2, seed=3)) for _ in range(2)]
        assert [r.headers["x-cache"] for r in best] == ["miss", "hit"]
        assert best[0].json()["choices"] == best[1].json()["choices"]
        assert len(engine.calls) == 2


async def test_entries_expire_after_the_ttl(backend: str) -> None:
    engine = FakeEngine()
    # Long enough for the hit on a loaded machine, short enough to wait out.
    async with cached(engine, backend, response_cache_ttl=1.5) as c:
        await c.post(CHAT, chat_body())
        assert (await c.post(CHAT, chat_body())).headers["x-cache"] == "hit"
        await asyncio.sleep(1.8)
        assert (await c.post(CHAT, chat_body())).headers["x-cache"] == "miss"
        assert len(engine.calls) == 2


def _key(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_entries_are_scoped_per_api_key_unless_shared(backend: str) -> None:
    engine = FakeEngine()
    async with cached(engine, backend, api_key=["alice-key", "bob-key"]) as c:
        await c.post(CHAT, chat_body(), **_key("alice-key"))
        bob = await c.post(CHAT, chat_body(), **_key("bob-key"))
        alice = await c.post(CHAT, chat_body(), **_key("alice-key"))
        assert [r.headers["x-cache"] for r in (bob, alice)] == ["miss", "hit"]
    engine = FakeEngine()
    async with cached(
        engine, backend, api_key=["alice-key", "bob-key"], response_cache_shared=True
    ) as c:
        await c.post(CHAT, chat_body(max_tokens=5), **_key("alice-key"))
        bob = await c.post(CHAT, chat_body(max_tokens=5), **_key("bob-key"))
        assert bob.headers["x-cache"] == "hit"


async def test_cache_control_opts_out(backend: str) -> None:
    engine = FakeEngine()
    async with cached(engine, backend) as c:
        for _ in range(2):
            response = await c.post(CHAT, chat_body(), **{"Cache-Control": "no-store"})
            assert response.headers["x-cache"] == "miss"
        # no-store wrote nothing.
        assert (await c.post(CHAT, chat_body())).headers["x-cache"] == "miss"
        # no-cache does not read, but refreshes the entry.
        refreshed = await c.post(CHAT, chat_body(), **{"Cache-Control": "max-age=0, No-Cache"})
        assert refreshed.headers["x-cache"] == "miss"
        assert (await c.post(CHAT, chat_body())).headers["x-cache"] == "hit"
        assert len(engine.calls) == 4


async def test_a_failed_answer_is_not_stored(backend: str) -> None:
    engine = FakeEngine(fail_at_step=2, fault=RuntimeError("boom"))
    async with cached(engine, backend) as c:
        broken = await c.post(CHAT, chat_body(stream=True))
        assert '"error"' in broken.text
        engine.fail_at_step = None
        assert (await c.post(CHAT, chat_body(stream=True))).headers["x-cache"] == "miss"
        assert (await c.post(CHAT, chat_body(stream=True))).headers["x-cache"] == "hit"
        assert len(engine.calls) == 2


async def test_the_metrics_are_exposed(backend: str) -> None:
    async with cached(FakeEngine(), backend) as c:
        for name in (
            "oai_cache_hits_total",
            "oai_cache_misses_total",
            "oai_cache_coalesced_total",
            "oai_cache_evictions_total",
            "oai_cache_backend_errors_total",
            "oai_cache_bytes",
        ):
            assert await c.metric(name) == 0


async def test_a_completion_to_be_stored_is_always_the_engines(backend: str) -> None:
    engine = FakeEngine()
    async with cached(engine, backend) as c:
        stored = [await c.post(CHAT, chat_body(store=True)) for _ in range(2)]
        assert all("x-cache" not in r.headers for r in stored)
        assert len(engine.calls) == 2
        fetched = await c.client.get(f"/v1/chat/completions/{stored[1].json()['id']}")
        assert fetched.status_code == 200


async def test_a_hit_logs_the_token_counts_of_the_answer_it_replays(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    engine = FakeEngine()
    async with cached(engine, backend) as c:
        with caplog.at_level(logging.INFO, logger="oai_server.access"):
            miss = await c.post(CHAT, chat_body())
            hit = await c.post(CHAT, chat_body())
            streamed = await c.post(CHAT, chat_body(stream=True))
        assert (hit.headers["x-cache"], streamed.headers["x-cache"]) == ("hit", "hit")
        usage = miss.json()["usage"]
        counts = (
            f"prompt_tokens={usage['prompt_tokens']} "
            f"completion_tokens={usage['completion_tokens']} "
        )
        lines = [r.getMessage() for r in caplog.records if r.name == "oai_server.access"]
        assert len(lines) == 3
        assert all(counts in line for line in lines), lines
