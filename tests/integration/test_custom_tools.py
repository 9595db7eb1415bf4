"""A custom tool forced by name on the real engine: its input is decoded under its grammar
(Lark, or a regular expression) through vLLM's structured outputs, on Chat and Responses."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.integration.conftest import MODEL, Server

pytestmark = pytest.mark.integration

LARK = 'start: "*** Begin Patch\\n" LINE "*** End Patch"\nLINE: /[a-z ]{1,16}\\n/'
PATCH = re.compile(r"\*\*\* Begin Patch\n[a-z ]{1,16}\n\*\*\* End Patch")
REGEX = r"(add|remove) [a-z]{1,8}"
ASK: Any = [{"role": "user", "content": "Add a file that says hello."}]


@pytest.fixture
def client(server: Server, sdk_http: httpx.Client) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=server.base_url, api_key="unused", http_client=sdk_http, max_retries=0
    ) as c:
        yield c


def test_chat_custom_tool_input_follows_its_regex(client: openai.OpenAI) -> None:
    tool: Any = {
        "type": "custom",
        "custom": {
            "name": "edit",
            "format": {"type": "grammar", "grammar": {"syntax": "regex", "definition": REGEX}},
        },
    }
    reply = client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        tools=[tool],
        tool_choice={"type": "custom", "custom": {"name": "edit"}},
        max_tokens=24,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.type == "custom"
    assert call.custom.name == "edit"
    assert re.fullmatch(REGEX, call.custom.input), call.custom.input


def test_responses_custom_tool_input_follows_its_lark_grammar(client: openai.OpenAI) -> None:
    tool: Any = {
        "type": "custom",
        "name": "apply_patch",
        "format": {"type": "grammar", "syntax": "lark", "definition": LARK},
    }
    with client.responses.stream(
        model=MODEL,
        input=ASK,
        tools=[tool],
        tool_choice={"type": "custom", "name": "apply_patch"},
        max_output_tokens=48,
        store=False,
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.custom_tool_call_input.delta"]
        response = stream.get_final_response()
    (item,) = response.output
    assert item.type == "custom_tool_call"
    assert PATCH.fullmatch(item.input), item.input
    assert "".join(deltas) == item.input
