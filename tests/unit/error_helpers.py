"""Helpers for the error tests: the exact error envelope, an app that keeps serving."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.errors import OpenAIError
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport
from tests.unit.conftest import chat_body

CHAT = "/v1/chat/completions"


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The error object of `response`, checked to be exactly OpenAI's envelope."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["type"], str)
    assert error["param"] is None or isinstance(error["param"], str)
    assert error["code"] is None or isinstance(error["code"], str)
    # FastAPI's own validation body never leaks through.
    assert "detail" not in response.text
    return error


@asynccontextmanager
async def raw_serve(engine: FakeEngine, *, ready: bool) -> AsyncIterator[httpx.AsyncClient]:
    """The app around `engine`; waits for the engine only if `ready`.

    Exceptions the app re-raises after answering (Starlette does so for a 500)
    stay inside, as with a real server, so the test sees the response.
    """
    app = create_app(Settings(), engine)
    async with app.router.lifespan_context(app):
        while ready:
            try:
                await engine.check_health()
            except OpenAIError:
                await asyncio.sleep(0.001)
            else:
                break
        inner = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        transport = AsyncValidatingTransport(transport=inner)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


async def assert_still_serves(client: httpx.AsyncClient) -> None:
    response = await client.post(CHAT, json=chat_body())
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"]
