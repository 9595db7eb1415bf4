"""Helpers of the store's suite; its `store_url` fixture is in `tests/store/fixtures.py`."""

from __future__ import annotations

from typing import Any

import httpx
import openai
from fastapi import FastAPI

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport, ValidatingTransport

MODEL = "smollm2-135m-instruct"


# Two real keys (`--api-key`): each is a principal, and sees only what it stored.
KEYS = ["sk-alice", "sk-bob"]


def make_app(store_url: str, engine: FakeEngine | None = None, **settings: Any) -> FastAPI:
    return create_app(Settings(store_url=store_url, **settings), engine or FakeEngine())


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
