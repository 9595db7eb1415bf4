"""A cached answer whose client leaves mid-stream, against a real uvicorn on 127.0.0.1.

In-process ASGI clients never disconnect, so this opens real sockets: the leaver's
engine request is aborted, nothing of its half answer is stored, and a follower that was
waiting for it answers from the engine itself instead of hanging.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.cache.conftest import chat_body, chat_text, sse_chunks
from tests.live import serve_async
from tests.unit.test_disconnect import eventually, validating_client

CHAT = "/v1/chat/completions"


async def test_a_leader_that_leaves_mid_stream_stores_nothing_and_frees_its_followers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = FakeEngine(token_delay=0.02, reply="word " * 100)
    body = chat_body(stream=True, max_tokens=40)
    app = create_app(Settings(response_cache="memory"), engine)
    cache = app.state.wired.cache
    assert cache is not None
    # A request looks for an identical one in flight first: the leader finds none, the
    # follower finds the leader's and waits on it. Seen, not assumed after a sleep.
    looked = 0
    following = asyncio.Event()
    in_flight = cache.in_flight

    async def watched_in_flight(*args: Any) -> Any:
        nonlocal looked
        looked += 1
        if looked == 2:
            following.set()
        return await in_flight(*args)

    monkeypatch.setattr(cache, "in_flight", watched_in_flight)
    async with serve_async(app) as url, validating_client(url) as http:
        async with http.stream("POST", CHAT, json=body) as leader:
            assert leader.headers["x-cache"] == "miss"
            lines = leader.aiter_lines()
            while not (await anext(lines)).startswith('data: {"id'):
                pass
            follower = asyncio.create_task(http.post(CHAT, json=body))
            await asyncio.wait_for(following.wait(), 10)
            assert not follower.done()
        # Leaving the block closes the half-read stream, and so the connection.
        answer: httpx.Response = await asyncio.wait_for(follower, 10)
        assert answer.headers["x-cache"] == "miss"
        assert chat_text(sse_chunks(answer)) == ("word " * 40).strip()
        assert await eventually(lambda: len(engine.aborted) == 1)
        assert len(engine.calls) == 2
        again = await http.post(CHAT, json=body)
        assert again.headers["x-cache"] == "hit"  # the follower's whole answer, not the leaver's
        assert chat_text(sse_chunks(again)) == chat_text(sse_chunks(answer))
