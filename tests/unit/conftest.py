"""In-process app with the fake engine, for fast HTTP-level tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
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
