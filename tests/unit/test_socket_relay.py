"""A replica's side of a WebSocket relayed by the Ray gateway (`ray_serve/sockets.py`),
without Ray: the session runs the app on the socket, a client that leaves aborts the turn
in progress, and a handshake the app refuses becomes the WebSocket error event."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.types import Message

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.ray_serve.sockets import REPLICA_MESSAGE, Sessions, refusal
from oai_server.settings import Settings

MODEL = "smollm2-135m-instruct"
SCOPE = {
    "type": "websocket",
    "asgi": {"version": "3.0"},
    "scheme": "ws",
    "http_version": "1.1",
    "path": "/v1/responses",
    "raw_path": b"/v1/responses",
    "root_path": "",
    "query_string": b"",
    "headers": [],
    "client": ("127.0.0.1", 50000),
    "server": ("127.0.0.1", 8000),
    "subprotocols": [],
}


def create(**body: Any) -> Message:
    text = json.dumps({"type": "response.create", "model": MODEL, **body})
    return {"type": "websocket.receive", "text": text}


async def messages(batches: AsyncIterator[list[Message]]) -> AsyncIterator[Message]:
    async for batch in batches:
        for message in batch:
            yield message


async def test_a_session_answers_its_first_and_later_events_in_order() -> None:
    engine = FakeEngine(reply="Hello there.")
    app = create_app(Settings(), engine)
    sessions = Sessions("replica-1")
    async with app.router.lifespan_context(app):
        sent = messages(sessions.open(app, "s1", SCOPE, create(input="one")))
        opened = await anext(sent)
        assert opened == {"type": REPLICA_MESSAGE, "replica": "replica-1"}
        kinds = []
        async with asyncio.timeout(10):
            async for message in sent:
                kinds.append(json.loads(message["text"])["type"] if "text" in message else "")
                if kinds[-1] == "response.completed":
                    if kinds.count("response.completed") == 2:
                        break
                    assert sessions.deliver("s1", create(input="two"))
        await sent.aclose()
    assert kinds.count("response.created") == 2
    assert not sessions.deliver("s1", create(input="three"))  # the session has ended


async def test_a_client_that_leaves_mid_answer_aborts_the_engine_request() -> None:
    engine = FakeEngine(reply="word " * 500, token_delay=0.02)
    app = create_app(Settings(), engine)
    async with app.router.lifespan_context(app):
        sent = messages(Sessions("r").open(app, "s1", SCOPE, create(input="x")))
        async with asyncio.timeout(10):
            async for message in sent:
                if "output_text.delta" in message.get("text", ""):
                    break
            await sent.aclose()  # as the gateway's cancel of the session's call
    assert engine.aborted == [engine.calls[0].request_id]


async def test_a_refused_handshake_becomes_the_error_event() -> None:
    app = create_app(Settings(api_key=["sk-good"]), FakeEngine())
    async with app.router.lifespan_context(app):
        sent = [m async for m in messages(Sessions("r").open(app, "s1", SCOPE, create()))]
    start, body = sent[1:]
    event = json.loads(refusal(start["status"], body["body"]))
    assert event["type"] == "error"
    assert event["status"] == 401
    assert event["error"]["code"] is not None
    assert "API key" in event["error"]["message"]
