"""In-process app with the fake engine, for fast HTTP-level tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.errors import OpenAIError
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport

MODEL = "smollm2-135m-instruct"


def staying_client(body: bytes) -> Callable[[], Awaitable[dict[str, Any]]]:
    """An ASGI `receive` that gives `body` in one message, then waits: the client stays."""
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return receive


def chat_scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    """The ASGI scope of a `POST /v1/chat/completions`, with `headers` besides the host's and
    the content type's: for tests that drive the app without a client."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"test"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


ClientFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@asynccontextmanager
async def serve(engine: FakeEngine, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The app around `engine`, started, with a client talking to it in-process."""
    app = create_app(Settings(**settings), engine)
    async with app.router.lifespan_context(app):
        for _ in range(100):
            try:
                await engine.check_health()
                break
            except OpenAIError:
                await asyncio.sleep(0.01)
        transport = AsyncValidatingTransport(transport=httpx.ASGITransport(app=app))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
async def client(engine: FakeEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(engine) as c:
        yield c


def chat_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
    body.update(overrides)
    return body
