"""One Realtime session against the real engine, through the official SDK."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import openai
import pytest

from tests.integration.conftest import MODEL, Server
from tests.realtime.conftest import events_until

pytestmark = pytest.mark.integration

USER: Any = {
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "Count to a thousand."}],
}


async def test_a_realtime_session_on_the_real_engine(server: Server) -> None:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    async with client.realtime.connect(model=MODEL) as conn:
        await events_until(conn, "session.created")
        await conn.session.update(session={"type": "realtime", "max_output_tokens": 16})
        await events_until(conn, "session.updated")
        await conn.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "What is the capital of France?"}],
            }
        )
        await conn.response.create()
        events = await events_until(conn, "response.done")
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    response = events[-1]["response"]
    assert response["status"] in ("completed", "incomplete")
    assert response["output"][0]["content"][0]["text"] == text
    assert text.strip()
    assert 0 < response["usage"]["output_tokens"] <= 16
    assert response["usage"]["input_tokens"] > 10


async def _until_idle(server: Server) -> float:
    """Seconds until the engine works on nothing (fails after 10)."""
    began = time.monotonic()
    while await asyncio.to_thread(server.running_requests) > 0:
        assert time.monotonic() - began < 10, "the engine went on generating for nobody"
        await asyncio.sleep(0.05)
    return time.monotonic() - began


async def test_cancel_and_close_abort_the_real_engine_request(server: Server) -> None:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    long = {"type": "realtime", "max_output_tokens": 1500}  # a minute or more, unless aborted
    async with client.realtime.connect(model=MODEL) as conn:
        await events_until(conn, "session.created")
        await conn.session.update(session=long)  # type: ignore[arg-type]
        await events_until(conn, "session.updated")
        await conn.conversation.item.create(item=USER)  # type: ignore[arg-type]
        await conn.response.create()
        await events_until(conn, "response.output_text.delta")
        assert await asyncio.to_thread(server.running_requests) == 1
        await conn.response.cancel()
        done = (await events_until(conn, "response.done"))[-1]["response"]
        cancelled_s = await _until_idle(server)
        await conn.response.create()
        await events_until(conn, "response.output_text.delta")
    closed_s = await _until_idle(server)
    print(
        f"Realtime on the real engine: idle {cancelled_s:.2f} s after cancel, "
        f"{closed_s:.2f} s after close"
    )
    assert done["status"] == "cancelled"
    assert done["status_details"]["reason"] == "client_cancelled"
