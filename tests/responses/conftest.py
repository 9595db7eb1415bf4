"""Apps for the Responses tests: the fake engine with a template that shows every turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from oai_server.engine.fake import FakeEngine
from tests.store.conftest import make_app

# Renders every turn and which call a tool result answers, so a test can read in the
# prompt which earlier turns the server rebuilt. It ignores `tools`, so the server writes
# the tools and earlier calls into the prompt itself, in the Hermes format.
TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}"
    "{% if m.tool_call_id %}[for {{ m.tool_call_id }}]{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
# An earlier call as the prompt shows it (the server writes it in the model's tool-call format).
CALLED = '"get_weather", "arguments": {"city": "Paris"}}'
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def weather_reply(prompt: str) -> str:
    """Calls the tool until a tool result is in the prompt, then answers from it."""
    return "It is sunny in Paris." if "<|tool|>" in prompt else CALL


@pytest.fixture
def template(tmp_path: Path) -> Path:
    path = tmp_path / "template.jinja"
    path.write_text(TEMPLATE)
    return path


def app_on(store_url: str, template: Path, engine: FakeEngine, **settings: Any) -> FastAPI:
    return make_app(store_url, engine, chat_template=template, **settings)


def prompt_of(engine: FakeEngine, index: int = -1) -> str:
    return bytes(engine.calls[index].prompt_token_ids).decode()
