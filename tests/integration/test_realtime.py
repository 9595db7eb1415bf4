"""One Realtime session against the real engine, through the official SDK."""

from __future__ import annotations

import openai

from tests.integration.conftest import MODEL, Server
from tests.realtime.conftest import events_until


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
