"""Production behaviour against a real uvicorn with the fake engine: keys, limits, ids, drain."""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import FastAPI, WebSocket

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.redis_server import redis_url

__all__ = ["MODEL", "chat_body", "make_app", "new_key", "redis_url"]

MODEL = "smollm2-135m-instruct"
WS_PATH = "/v1/test-echo"


def new_key() -> str:
    return "sk-" + secrets.token_hex(12)


def chat_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
    body.update(overrides)
    return body


def make_app(engine: FakeEngine | None = None, **settings: Any) -> FastAPI:
    """The production app around a fake engine, plus a test-only WebSocket echo route
    (the server has none yet; auth must cover any WebSocket route)."""
    app = create_app(Settings(**settings), engine or FakeEngine())

    @app.websocket(WS_PATH)
    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text(await websocket.receive_text())
        await websocket.close()

    return app
