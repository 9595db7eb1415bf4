"""The cache suite runs once per backend: in memory, and a real redis-server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from benchmarks.fixtures.redis_server import RedisServer
from oai_server.app import create_app
from oai_server.cache import ResponseCache
from oai_server.engine.fake import FakeEngine
from oai_server.engine.fake.pooling import FakeEmbeddingEngine
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport

MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> str:
    """The `--response-cache` value of each run of the suite, starting empty."""
    if request.param == "memory":
        return "memory"
    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    return server.url


async def until(condition: Callable[[], object], what: str, timeout_s: float = 10.0) -> None:
    """Wait until `condition()` holds (polling; a fake engine has no event for it)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        await asyncio.sleep(0.005)


@dataclass
class Cached:
    """A client of an app with the cache on, and that cache."""

    client: httpx.AsyncClient
    cache: ResponseCache

    async def post(self, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
        response = await self.client.post(path, json=body, headers=headers)
        assert response.status_code == 200, response.text
        return response

    async def metric(self, name: str) -> float:
        text = (await self.client.get("/metrics")).text
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"{name} is not in /metrics")


@asynccontextmanager
async def cached(
    engine: FakeEngine,
    backend: str,
    embedder: FakeEmbeddingEngine | None = None,
    **settings: Any,
) -> AsyncIterator[Cached]:
    """The app around `engine` (and `embedder`) with the cache on `backend`, and a
    validating client."""
    app = create_app(Settings(response_cache=backend, **settings), engine, embedder=embedder)
    cache = app.state.wired.cache
    assert cache is not None
    async with app.router.lifespan_context(app):
        await engine.start()
        if embedder is not None:
            await embedder.start()
        transport = AsyncValidatingTransport(transport=httpx.ASGITransport(app=app))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield Cached(client, cache)


def sse_chunks(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON chunks of an SSE body; asserts it ends with `[DONE]`."""
    lines = [line for line in response.text.split("\n\n") if line]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


def without_identity(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k not in ("id", "created")} for c in chunks]


def chat_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def chat_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0,
        "max_tokens": 16,
    }
    body.update(overrides)
    return body


def completion_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "prompt": "Once", "temperature": 0, "max_tokens": 16}
    body.update(overrides)
    return body
