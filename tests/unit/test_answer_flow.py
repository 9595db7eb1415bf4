"""Every API's stream goes through the one answer flow: sent past the middleware
(`BODY_SEND`), and cancelled, with its engine request, when the client leaves. Against
the fake engine; the client that leaves is a real one, on a real uvicorn."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve_async
from tests.unit.conftest import MODEL, chat_body, chat_scope, staying_client
from tests.unit.test_disconnect import eventually

HELLO = [{"role": "user", "content": "Hi"}]
# A stream of each API, a few tokens long.
STREAMS = {
    "/v1/chat/completions": chat_body(stream=True, max_tokens=8),
    "/v1/responses": {"model": MODEL, "input": "Hi", "stream": True, "max_output_tokens": 8},
    "/v1/messages": {"model": MODEL, "messages": HELLO, "stream": True, "max_tokens": 8},
}


class Watching:
    """A middleware that sees what passes through its `send`, as the app's own do."""

    def __init__(self, app: ASGIApp, seen: list[str]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def watched(message: Message) -> None:
            self.seen.append(message["type"])
            await send(message)

        await self.app(scope, receive, watched)


@pytest.mark.parametrize("path", list(STREAMS))
async def test_a_streams_bodies_go_past_the_middleware(path: str) -> None:
    app = create_app(Settings(), FakeEngine(reply="one two three"))
    seen: list[str] = []
    app.add_middleware(Watching, seen=seen)
    scope = chat_scope() | {"path": path, "raw_path": path.encode()}
    received: list[Message] = []

    async def send(message: Message) -> None:
        received.append(message)

    async with app.router.lifespan_context(app):
        await app.state.server.engine.start()
        await app(scope, staying_client(json.dumps(STREAMS[path]).encode()), send)
    bodies = b"".join(m["body"] for m in received if m["type"] == "http.response.body")
    assert received[0]["status"] == 200
    assert b"three" in bodies
    assert not received[-1]["more_body"]
    # The start went through the middleware, as it must (its headers, its status); the
    # bodies went straight to the server.
    assert seen == ["http.response.start"]


async def test_a_client_that_leaves_a_response_stream_aborts_its_engine_request() -> None:
    engine = FakeEngine(token_delay=0.02, reply="word " * 500)
    body: dict[str, Any] = {"model": MODEL, "input": "Hi", "stream": True, "store": False}
    async with serve_async(create_app(Settings(), engine)) as url, httpx.AsyncClient() as http:
        async with http.stream("POST", f"{url}/v1/responses", json=body) as response:
            assert response.status_code == 200
            deltas = 0
            async for line in response.aiter_lines():
                if line.startswith("data: ") and "output_text.delta" in line:
                    deltas += 1
                if deltas == 3:
                    break
            assert engine.running_requests() == 1
        # Leaving the block closes the half-read stream, and so the connection.
        # Generating on, the engine would take 10 s to finish.
        assert await eventually(lambda: engine.running_requests() == 0, within=2.0)
        assert engine.aborted == [engine.calls[0].request_id]
