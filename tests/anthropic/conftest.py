"""A real uvicorn with the fake engine, and Anthropic's SDK pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve
from tests.responses.conftest import TEMPLATE

MODEL = "smollm2-135m-instruct"
KEY = "sk-anthropic-test"
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@pytest.fixture
def template(tmp_path: Path) -> Path:
    """A template that shows every turn, and which call a tool result answers."""
    path = tmp_path / "template.jinja"
    path.write_text(TEMPLATE)
    return path


@contextmanager
def server(engine: FakeEngine, **settings: Any) -> Iterator[str]:
    """The app around `engine`, served; yields its root URL."""
    with serve(create_app(Settings(**settings), engine)) as root:
        yield root


_OPEN: list[anthropic.Anthropic] = []


def client(root: str, **options: Any) -> anthropic.Anthropic:
    """The SDK on `root`; closed when the test ends."""
    options.setdefault("api_key", KEY)
    sdk = anthropic.Anthropic(base_url=root, max_retries=0, **options)
    _OPEN.append(sdk)
    return sdk


@pytest.fixture(autouse=True)
def close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def prompt_of(engine: FakeEngine, index: int = -1) -> str:
    return bytes(engine.calls[index].prompt_token_ids).decode()
