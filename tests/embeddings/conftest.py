"""An in-process app with the fake chat and embedding engines, and SDK clients for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.fake.pooling import FakeEmbeddingEngine
from oai_server.errors import OpenAIError
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport

CHAT = "smollm2-135m-instruct"
EMBEDDING = "all-minilm-l6-v2"


@asynccontextmanager
async def embedding_app(
    embedder: FakeEmbeddingEngine | None = None, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with both engines started, and a client talking to it in-process."""
    engine = FakeEngine()
    embedder = embedder or FakeEmbeddingEngine()
    app = create_app(Settings(**settings), engine, embedder=embedder)
    async with app.router.lifespan_context(app):
        for _ in range(100):
            try:
                await engine.check_health()
                await embedder.check_health()
                break
            except OpenAIError:
                await asyncio.sleep(0.01)
        transport = AsyncValidatingTransport(transport=httpx.ASGITransport(app=app))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


def sdk(client: httpx.AsyncClient) -> openai.AsyncOpenAI:
    """The OpenAI SDK over `client`."""
    return openai.AsyncOpenAI(
        base_url="http://test/v1", api_key="unused", http_client=client, max_retries=0
    )
