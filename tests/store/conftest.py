"""The store's suite runs on SQLite and on a real PostgreSQL server this session starts."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport, ValidatingTransport
from tests.store.postgres import PostgresServer

MODEL = "smollm2-135m-instruct"
_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(
    request: pytest.FixtureRequest, tmp_path: Path, postgres: PostgresServer
) -> str:
    """A fresh, empty database of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'store.db'}"
    return await postgres.create_database(f"test_{next(_databases)}")


class PrincipalMiddleware:
    """Stands in for the multi-key auth middleware: a bearer token's hash is the principal."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            token = dict(scope["headers"]).get(b"authorization", b"")
            principal = hashlib.sha256(token).hexdigest()[:16]
            scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def make_app(
    store_url: str, engine: FakeEngine | None = None, *, principals: bool = False, **settings: Any
) -> FastAPI:
    app = create_app(Settings(store_url=store_url, **settings), engine or FakeEngine())
    if principals:
        app.add_middleware(PrincipalMiddleware)
    return app


def sdk(base_url: str, api_key: str = "sk-test") -> openai.OpenAI:
    """The official SDK, every body it receives checked against the spec."""
    return openai.OpenAI(
        base_url=f"{base_url}/v1",
        api_key=api_key,
        max_retries=0,
        http_client=httpx.Client(transport=ValidatingTransport()),
    )


def async_sdk(base_url: str, api_key: str = "sk-test") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"{base_url}/v1",
        api_key=api_key,
        max_retries=0,
        http_client=httpx.AsyncClient(transport=AsyncValidatingTransport(), timeout=60),
    )


def ask(client: openai.OpenAI, text: str = "Hi", **options: Any) -> Any:
    return client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": text}], **options
    )
