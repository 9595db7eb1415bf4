"""Realtime `input_image` parts in a user message reach the engine, with the fake engine."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import websockets

from oai_server.engine.fake import FakeEngine
from tests.realtime.conftest import MODEL, checked, realtime_server
from tests.vision.images import RED, data_url


async def next_of(ws: websockets.ClientConnection, *kinds: str) -> dict[str, Any]:
    async with asyncio.timeout(60):
        while True:
            event = checked(await ws.recv())
            if event["type"] in kinds:
                return event


async def test_an_input_image_reaches_the_engine_and_a_text_model_says_no() -> None:
    item = {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_image", "image_url": data_url(RED)},
            {"type": "input_text", "text": "What colour?"},
        ],
    }
    for engine in (FakeEngine(image_limit=2, image_tokens=5), FakeEngine()):
        async with realtime_server(engine) as root:
            url = root.replace("http://", "ws://") + f"/v1/realtime?model={MODEL}"
            async with websockets.connect(url) as ws:
                await next_of(ws, "session.created")
                await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
                await ws.send(json.dumps({"type": "response.create"}))
                done = await next_of(ws, "response.done", "error")
        if engine.image_limit:
            assert done["response"]["status"] == "completed", done
            (image,) = engine.calls[-1].options.images
            assert image.digest == hashlib.sha256(RED).hexdigest()
        else:
            # Refused: an error naming the reason, or a failed response with its code.
            assert "unsupported_parameter" in json.dumps(done), done
            assert engine.calls == []
