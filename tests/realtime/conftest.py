"""A real uvicorn with the fake engine, and Realtime clients that check every server event."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import openai
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.conformance import default_log, validate
from tests.live import serve_async

MODEL = "smollm2-135m-instruct"
# Generous on a loaded machine, far below the test's own timeout: a missing event costs
# this, not the whole run's patience.
EVENTS_TIMEOUT_S = 30.0


@asynccontextmanager
async def realtime_server(engine: FakeEngine, **settings: Any) -> AsyncIterator[str]:
    """A live server around `engine`; yields its root URL."""
    async with serve_async(create_app(Settings(**settings), engine)) as root:
        yield root


def checked(raw: bytes | str) -> dict[str, Any]:
    """One server event, checked against the spec's `RealtimeServerEvent`."""
    event: dict[str, Any] = json.loads(raw)
    validate("RealtimeServerEvent", event)
    default_log.record_check()
    return event


async def events_until(
    connection: Any,
    last: str,
    *,
    into: list[dict[str, Any]] | None = None,
    timeout_s: float = EVENTS_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Receive events until one of type `last`; every one is validated. An event that
    never comes fails the test after `timeout_s`, naming what came instead."""
    seen: list[dict[str, Any]] = [] if into is None else into
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                event = checked(await connection.recv_bytes())
                seen.append(event)
                if event["type"] == last:
                    return seen
    except TimeoutError:
        types = [e["type"] for e in seen]
        raise AssertionError(f"no {last} within {timeout_s} s; got {types}") from None


def client_for(root: str, api_key: str = "unused") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{root}/v1", api_key=api_key, max_retries=0)


ServerFactory = Callable[..., AbstractAsyncContextManager[str]]


@pytest.fixture
def server() -> ServerFactory:
    return realtime_server
