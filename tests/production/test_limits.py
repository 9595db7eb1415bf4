"""Per-key limits on requests and tokens: 429 with Retry-After, OpenAI's headers, Redis."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from benchmarks.fixtures.redis_server import RedisServer
from oai_server.engine.fake import FakeEngine
from oai_server.limits.limiter import format_reset
from tests.conformance import ValidatingTransport, async_validating_client
from tests.live import serve, serve_async
from tests.production.conftest import MODEL, chat_body, make_app, new_key
from tests.realtime.conftest import client_for as realtime_client
from tests.realtime.conftest import events_until

REALTIME_HI: Any = {
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "Hi"}],
}

CHAT = "/v1/chat/completions"
# Windows are aligned to the clock: one of 10^9 s (the current one ends in 2033) keeps a
# test inside one window, where an hour's would break at the top of the hour.
LONG_WINDOW = 1e9
RATE_HEADERS = [
    f"x-ratelimit-{what}-{kind}"
    for what in ("limit", "remaining", "reset")
    for kind in ("requests", "tokens")
]


def _at_a_window_start(window_s: float) -> float:
    """Sleep into the start of the next window, so a test's requests get a whole one;
    that window's start, on the clock the limiter reads."""
    start = (time.time() // window_s + 1) * window_s
    time.sleep(start - time.time() + 0.01)
    return start


def _window_left_s() -> float:
    """Seconds until the current `LONG_WINDOW` ends, on the clock the limiter reads."""
    return LONG_WINDOW - time.time() % LONG_WINDOW


def _auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def _error(response: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


async def test_requests_per_key_are_limited_separately() -> None:
    a, b = new_key(), new_key()
    app = make_app(
        api_key=[a, b], rate_limit_rpm=3, rate_limit_tpm=100_000, rate_limit_window=LONG_WINDOW
    )
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:
        remaining = []
        for _ in range(3):
            ok = await http.post(CHAT, json=chat_body(), headers=_auth(a))
            assert ok.status_code == 200
            assert all(name in ok.headers for name in RATE_HEADERS)
            remaining.append(int(ok.headers["x-ratelimit-remaining-requests"]))
        assert remaining == [2, 1, 0]
        refused = await http.post(CHAT, json=chat_body(), headers=_auth(a))
        assert refused.status_code == 429
        assert _error(refused)["code"] == "rate_limit_exceeded"
        assert _error(refused)["type"] == "requests"
        assert 1 <= int(refused.headers["retry-after"]) <= LONG_WINDOW
        assert refused.headers["x-ratelimit-limit-requests"] == "3"
        assert refused.headers["x-ratelimit-remaining-requests"] == "0"
        assert all(name in refused.headers for name in RATE_HEADERS)
        # Another key is untouched; a non-generation route counts too.
        other = await http.post(CHAT, json=chat_body(), headers=_auth(b))
        assert other.status_code == 200
        assert other.headers["x-ratelimit-remaining-requests"] == "2"
        assert (await http.get("/v1/models", headers=_auth(a))).status_code == 429
        # Probes and the chat page are not counted.
        assert (await http.get("/health")).status_code == 200
        assert (await http.get("/")).status_code == 200
        # A WebSocket session counts as a request: refused with the same 429.
        realtime = root.replace("http://", "ws://") + f"/v1/realtime?model={MODEL}"
        offered = ["realtime", f"openai-insecure-api-key.{a}"]
        with pytest.raises(InvalidStatus) as refused_ws:
            async with websockets.connect(realtime, subprotocols=offered):  # type: ignore[arg-type]
                pass
        assert refused_ws.value.response.status_code == 429
        assert refused_ws.value.response.headers["retry-after"]
        metrics = (await http.get("/metrics")).text
        assert 'oai_rate_limit_rejections_total{limit="requests"} 3.0' in metrics


async def test_tokens_are_reserved_up_front_and_settled() -> None:
    key = new_key()
    engine = FakeEngine(token_delay=0.05)  # replies "Hello! How ... today?": 7 tokens
    app = make_app(engine, api_key=[key], rate_limit_tpm=1000, rate_limit_window=LONG_WINDOW)
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:
        body = chat_body(max_tokens=900)
        first = await http.post(CHAT, json=body, headers=_auth(key))
        assert first.status_code == 200
        used = first.json()["usage"]["total_tokens"]
        # Settled: only the tokens used stay counted, not the 900 reserved.
        after = await http.post("/tokenize", json={"prompt": "x"}, headers=_auth(key))
        assert int(after.headers["x-ratelimit-remaining-tokens"]) == 1000 - used

        async def hold() -> httpx.Response:
            return await http.post(CHAT, json=body, headers=_auth(key))

        holding = asyncio.create_task(hold())
        deadline = time.monotonic() + 10
        while not engine.running_requests():  # polling the fake engine
            assert time.monotonic() < deadline, "the request never reached the engine"
            await asyncio.sleep(0.01)
        # While 900 are reserved by a request in flight, another 900 do not fit.
        refused = await http.post(CHAT, json=body, headers=_auth(key))
        assert refused.status_code == 429
        assert _error(refused)["type"] == "tokens"
        assert "retry-after" in refused.headers
        assert (await holding).status_code == 200
        # A request larger than what is left is refused; a small one passes.
        small = await http.post(CHAT, json=chat_body(max_tokens=10), headers=_auth(key))
        assert small.status_code == 200


def test_openai_sdk_with_retries_waits_and_succeeds() -> None:
    key = new_key()
    window = 2.0  # room for three calls on a loaded machine
    app = make_app(api_key=[key], rate_limit_rpm=2, rate_limit_window=window)
    statuses: list[int] = []
    with (
        serve(app) as root,
        httpx.Client(
            transport=ValidatingTransport(),
            event_hooks={"response": [lambda r: statuses.append(r.status_code)]},
        ) as http,
        openai.OpenAI(base_url=f"{root}/v1", api_key=key, http_client=http, max_retries=5) as sdk,
    ):
        start = _at_a_window_start(window)
        for _ in range(6):
            reply = sdk.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Hi"}]
            )
            assert reply.choices[0].message.content
        ended = time.time()
    rejected = statuses.count(429)
    elapsed = ended - start
    print(f"SDK: 6 calls, {len(statuses)} requests, {rejected} 429s retried, {elapsed:.2f} s")
    assert statuses.count(200) == 6
    # 2 per window: the 3rd call, in the first window, was refused and retried; six
    # calls need three windows, so the last one waited for the third to begin (timed
    # from the window's start, not from when this thread woke: a late wake-up on a
    # loaded machine shortens nothing the server decides).
    assert rejected >= 1
    assert ended >= start + 2 * window


async def test_redis_limits_are_shared_by_replicas(redis_url: str) -> None:
    key = new_key()
    settings: dict[str, Any] = {
        "api_key": [key],
        "rate_limit_rpm": 4,
        "rate_limit_window": LONG_WINDOW,
        "redis_url": redis_url,
    }
    async with (
        serve_async(make_app(**settings)) as one,
        serve_async(make_app(**settings)) as two,
        async_validating_client() as http,
    ):
        for root in (one, two, one, two):
            assert (await http.post(root + CHAT, json=chat_body(), headers=_auth(key))).is_success
        for root in (one, two):
            refused = await http.post(root + CHAT, json=chat_body(), headers=_auth(key))
            assert refused.status_code == 429
            assert refused.headers["x-ratelimit-remaining-requests"] == "0"


async def test_without_redis_each_replica_counts_alone() -> None:
    key = new_key()
    settings: dict[str, Any] = {
        "api_key": [key],
        "rate_limit_rpm": 1,
        "rate_limit_window": LONG_WINDOW,
    }
    async with (
        serve_async(make_app(**settings)) as one,
        serve_async(make_app(**settings)) as two,
        async_validating_client() as http,
    ):
        for root in (one, two):
            assert (await http.post(root + CHAT, json=chat_body(), headers=_auth(key))).is_success


def test_reset_durations_read_as_openai_writes_them() -> None:
    assert [format_reset(s) for s in (0.02, 1.5, 60, 61.25, 3600)] == [
        "20ms",
        "1.5s",
        "1m0s",
        "1m1.25s",
        "1h0m0s",
    ]


async def test_redis_killed_or_hanging_lets_requests_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    key = new_key()
    settings: dict[str, Any] = {"rate_limit_rpm": 1, "rate_limit_window": LONG_WINDOW}
    app = make_app(api_key=[key], redis_url=redis_server.url, **settings)
    try:
        async with serve_async(app) as root, async_validating_client(base_url=root) as http:

            async def status() -> int:
                return (await http.post(CHAT, json=chat_body(), headers=_auth(key))).status_code

            assert [await status(), await status()] == [200, 429]  # Redis counts
            redis_server.stop()
            assert [await status(), await status()] == [200, 200]
            redis_server.start()  # empty (nothing saved): counting starts again
            assert [await status(), await status()] == [200, 429]
            redis_server.freeze()
            try:
                took = []
                for _ in range(2):
                    began = time.monotonic()
                    assert await status() == 200
                    took.append(time.monotonic() - began)
            finally:
                redis_server.thaw()
    finally:
        redis_server.stop()
    print(f"a hanging Redis: two requests let through in {took[0]:.2f} s and {took[1]:.2f} s")
    # The first waits one command deadline (0.5 s) and marks Redis down; the second does
    # not ask it at all (the same bounds as the response cache's).
    assert took[0] < 1.5
    assert took[1] < 0.25
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    # One warning per outage, from the dependency's breaker: the limits' Redis is down.
    assert any("redis marked down" in r.getMessage() for r in warned)


async def test_without_keys_every_caller_shares_one_bucket() -> None:
    app = make_app(rate_limit_rpm=2, rate_limit_window=LONG_WINDOW)
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:
        statuses = [
            (await http.post(CHAT, json=chat_body(), headers=headers)).status_code
            for headers in ({}, _auth("sk-anything"), _auth("sk-something-else"))
        ]
    assert statuses == [200, 200, 429]


async def test_retry_after_ms_says_the_same_wait_in_milliseconds() -> None:
    key = new_key()
    # A window that cannot end between the two requests (a 30 s one aligned to the clock
    # could, in a few runs in a thousand).
    app = make_app(api_key=[key], rate_limit_rpm=1, rate_limit_window=LONG_WINDOW)
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:
        assert (await http.post(CHAT, json=chat_body(), headers=_auth(key))).status_code == 200
        before = _window_left_s()
        refused = await http.post(CHAT, json=chat_body(), headers=_auth(key))
        after = _window_left_s()
    assert refused.status_code == 429
    wait_ms = int(refused.headers["retry-after-ms"])
    # The wait is until the window ends, in milliseconds ...
    assert after * 1000 - 1 <= wait_ms <= before * 1000 + 1
    # ... and the same wait in whole seconds, rounded up.
    assert int(refused.headers["retry-after"]) == -(-wait_ms // 1000)


async def test_cache_hits_count_as_requests_but_spend_no_tokens() -> None:
    key = new_key()
    limits: dict[str, Any] = {"rate_limit_rpm": 10, "rate_limit_tpm": 10_000}
    app = make_app(api_key=[key], response_cache="memory", rate_limit_window=LONG_WINDOW, **limits)
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:

        async def standing() -> tuple[int, int]:
            """(tokens, requests) left, as a request that generates nothing sees them."""
            seen = await http.post("/tokenize", json={"prompt": "x"}, headers=_auth(key))
            left = seen.headers
            return int(left["x-ratelimit-remaining-tokens"]), int(
                left["x-ratelimit-remaining-requests"]
            )

        body = chat_body(temperature=0, max_tokens=100)  # determined: cacheable
        miss = await http.post(CHAT, json=body, headers=_auth(key))
        before = await standing()
        hit = await http.post(CHAT, json=body, headers=_auth(key))
        after = await standing()
    assert [miss.headers["x-cache"], hit.headers["x-cache"]] == ["miss", "hit"]
    assert before[0] == 10_000 - miss.json()["usage"]["total_tokens"]
    assert after[0] == before[0]  # the hit spent no tokens
    assert after[1] == before[1] - 2  # but counted as a request (and so did the probe)


async def test_token_limits_on_redis_are_shared_by_replicas(redis_url: str) -> None:
    key = new_key()
    settings: dict[str, Any] = {
        "api_key": [key],
        "rate_limit_tpm": 1000,
        "rate_limit_window": LONG_WINDOW,
        "redis_url": redis_url,
    }
    body = chat_body(max_tokens=400)
    async with (
        serve_async(make_app(**settings)) as one,
        serve_async(make_app(**settings)) as two,
        async_validating_client() as http,
    ):
        first = await http.post(one + CHAT, json=body, headers=_auth(key))
        spent = first.json()["usage"]["total_tokens"]
        # The other replica sees what the first one settled, and refuses what no longer fits.
        seen = await http.post(two + "/tokenize", json={"prompt": "x"}, headers=_auth(key))
        assert int(seen.headers["x-ratelimit-remaining-tokens"]) == 1000 - spent
        big = await http.post(
            two + CHAT, json=chat_body(max_tokens=1000 - spent), headers=_auth(key)
        )
    assert big.status_code == 429
    assert _error(big)["type"] == "tokens"


async def test_realtime_responses_reserve_tokens_and_each_response_settles_them() -> None:
    key = new_key()
    engine = FakeEngine()  # "Hello! How can I help you today?": 7 tokens
    app = make_app(engine, api_key=[key], rate_limit_tpm=300, rate_limit_window=LONG_WINDOW)
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:

        async def tokens_left() -> int:
            seen = await http.post("/tokenize", json={"prompt": "x"}, headers=_auth(key))
            return int(seen.headers["x-ratelimit-remaining-tokens"])

        client = realtime_client(root, key)
        async with client.realtime.connect(model=MODEL) as conn:
            await events_until(conn, "session.created")
            await conn.session.update(session={"type": "realtime", "max_output_tokens": 100})
            await events_until(conn, "session.updated")
            await conn.conversation.item.create(item=REALTIME_HI)  # type: ignore[arg-type]
            await conn.response.create()
            usage = (await events_until(conn, "response.done"))[-1]["response"]["usage"]
            # Reserved while it ran (the prompt plus max_output_tokens), settled when it
            # ended: the session holds only what it generated.
            assert await tokens_left() == 300 - usage["total_tokens"]
            # What is left cannot hold a reply of up to 300 tokens: refused, in the session.
            await conn.response.create(response={"max_output_tokens": 300})
            refused = (await events_until(conn, "response.done"))[-1]["response"]
            assert refused["status"] == "failed"
            assert refused["status_details"]["error"]["code"] == "rate_limit_exceeded"
        # The session is over: what it did not generate is given back.
        deadline = time.monotonic() + 10
        while (left := await tokens_left()) != 300 - usage["total_tokens"]:
            assert time.monotonic() < deadline, left
            await asyncio.sleep(0.05)
