"""Client disconnects and incremental delivery, against a real uvicorn on 127.0.0.1.

In-process ASGI clients buffer whole bodies and never disconnect, so these tests
open real sockets: a client that goes away must stop the engine request, and a
stream must reach the client token by token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport
from tests.live import serve_async
from tests.unit.conftest import MODEL, chat_body, chat_scope

LONG_REPLY = "word " * 500


@asynccontextmanager
async def live_server(engine: FakeEngine) -> AsyncIterator[str]:
    """A real uvicorn serving the app around `engine`; yields its root URL."""
    async with serve_async(create_app(Settings(), engine)) as url:
        yield url


async def eventually(condition: Callable[[], bool], within: float = 10.0) -> bool:
    """Whether `condition()` comes to hold within `within` seconds (polled; it returns as
    soon as it holds, so a generous wait costs a passing test nothing)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


def validating_client(base_url: str, **kwargs: Any) -> httpx.AsyncClient:
    transport = AsyncValidatingTransport(transport=httpx.AsyncHTTPTransport())
    return httpx.AsyncClient(transport=transport, base_url=base_url, **kwargs)


STREAMS = [
    ("/v1/chat/completions", chat_body(stream=True)),
    ("/v1/completions", {"model": MODEL, "prompt": "Go", "stream": True, "max_tokens": 400}),
]


@pytest.mark.parametrize(("path", "body"), STREAMS)
async def test_stream_closed_by_client_aborts_engine_request(
    path: str, body: dict[str, Any]
) -> None:
    engine = FakeEngine(token_delay=0.02, reply=LONG_REPLY)
    async with live_server(engine) as url, validating_client(url) as http:
        ids = []
        async with http.stream("POST", path, json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    ids.append(json.loads(line.removeprefix("data: "))["id"])
                if len(ids) == 2:
                    break
            assert engine.running_requests() == 1
        # Leaving the block closes the half-read response, and so the connection.
        assert await eventually(lambda: engine.running_requests() == 0)
        assert await eventually(lambda: ids[0] in engine.aborted), engine.aborted
        assert [call.request_id for call in engine.calls] == [ids[0]]


async def test_non_streamed_request_abandoned_by_client_is_aborted() -> None:
    engine = FakeEngine(token_delay=0.02, reply=LONG_REPLY)
    async with live_server(engine) as url, validating_client(url, timeout=0.3) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post("/v1/chat/completions", json=chat_body())
        [call] = engine.calls
        assert await eventually(lambda: engine.running_requests() == 0)
        assert await eventually(lambda: call.request_id in engine.aborted), engine.aborted


async def test_disconnect_is_not_logged_as_a_server_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = FakeEngine(token_delay=0.02, reply=LONG_REPLY)
    async with live_server(engine) as url, validating_client(url, timeout=0.3) as http:
        with caplog.at_level(logging.WARNING):
            with pytest.raises(httpx.ReadTimeout):
                await http.post("/v1/chat/completions", json=chat_body())
            path, body = STREAMS[0]
            async with http.stream("POST", path, json=body) as response:
                await response.aiter_lines().__anext__()
            assert await eventually(lambda: engine.running_requests() == 0)
            await asyncio.sleep(0.1)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [f"{r.name}: {r.getMessage()}" for r in errors]


async def test_stream_read_to_the_end_is_not_aborted() -> None:
    engine = FakeEngine(token_delay=0.001, reply="word " * 20)
    async with live_server(engine) as url, validating_client(url) as http:
        response = await http.post("/v1/chat/completions", json=chat_body(stream=True))
        assert response.text.endswith("data: [DONE]\n\n")
        answer = await http.post("/v1/chat/completions", json=chat_body())
        assert answer.json()["choices"][0]["message"]["content"] == engine.reply
        await asyncio.sleep(0.05)
    assert len(engine.calls) == 2
    assert engine.aborted == []
    assert engine.running_requests() == 0


async def test_stream_is_delivered_incrementally() -> None:
    words = 10
    engine = FakeEngine(token_delay=0.05, reply=" ".join(["tok"] * words))
    async with live_server(engine) as url, validating_client(url) as http:
        began = time.monotonic()
        arrivals: list[float] = []
        async with http.stream(
            "POST", "/v1/chat/completions", json=chat_body(stream=True)
        ) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line.removeprefix("data: "))
                if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    arrivals.append(time.monotonic() - began)
        total = time.monotonic() - began
    assert len(arrivals) == words
    # The generation takes words * 0.05 s; the first token must not wait for the last:
    # they arrive spread over the generation (buffered, they would come together). Load
    # only stretches the spread, where a bound on the first token's wait from the request
    # would fail when the machine is slow to connect.
    assert total >= words * 0.05
    assert arrivals[-1] - arrivals[0] >= (words - 2) * 0.05, arrivals


@pytest.mark.parametrize(("path", "body"), STREAMS)
async def test_stream_abandoned_while_queued_is_aborted_within_a_second(
    path: str, body: dict[str, Any]
) -> None:
    # Nothing has been sent yet (the engine has not produced a first token), so only
    # the connection itself says that the client left.
    engine = FakeEngine(prefill_delay=30, reply=LONG_REPLY)
    async with live_server(engine) as url, validating_client(url, timeout=0.3) as http:
        with pytest.raises(httpx.ReadTimeout):
            async with http.stream("POST", path, json=body) as response:
                await response.aread()
        left = time.monotonic()
        [call] = engine.calls
        assert await eventually(lambda: call.request_id in engine.aborted, within=1.0)
        assert time.monotonic() - left < 1.0
        assert engine.running_requests() == 0


async def test_abandoned_streamed_batch_aborts_every_prompt_within_a_second() -> None:
    engine = FakeEngine(token_delay=0.05, reply=LONG_REPLY)
    prompts = [f"prompt {i}" for i in range(200)]
    body = {"model": MODEL, "prompt": prompts, "stream": True, "max_tokens": 400}
    async with live_server(engine) as url, validating_client(url) as http:
        async with http.stream("POST", "/v1/completions", json=body) as response:
            assert response.status_code == 200
            await response.aiter_lines().__anext__()
            # Every prompt was handed to the engine together, before the first chunk.
            assert engine.running_requests() == len(prompts)
        left = time.monotonic()
        assert await eventually(lambda: engine.running_requests() == 0, within=1.0)
        assert time.monotonic() - left < 1.0
        assert len(engine.aborted) == len(prompts)


async def test_client_gone_between_the_streams_start_and_its_body_aborts_the_request() -> None:
    # A middleware may wait while the response starts (the limits' Redis backend reads the
    # caller's standing there): a client that leaves then is seen while nothing is guarded,
    # and the stream must still stop and release its engine request rather than generate
    # 400 tokens for nobody. In process, to hold that moment open.
    engine = FakeEngine(token_delay=0.02, reply=LONG_REPLY)
    app = create_app(Settings(), engine)
    body = json.dumps(chat_body(stream=True, max_tokens=400)).encode()
    started = asyncio.Event()
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await started.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200
            started.set()
            await asyncio.sleep(0.05)  # the watcher sees the client leave now

    scope = chat_scope()
    async with app.router.lifespan_context(app):
        await engine.start()
        await asyncio.wait_for(app(scope, receive, send), timeout=5)
        [call] = engine.calls
        assert await eventually(lambda: call.request_id in engine.aborted)
        assert engine.running_requests() == 0
