"""Agents' tools pass on Chat and Responses; a compiled schema is still bounded
(`tests/anthropic/test_agent_tools.py`: the same on Messages).

Claude Code's `Bash` tool takes a `script` of up to 524288 characters: a bound the grammar
compiler never sees, since such a tool is only shown to the model (`tool_choice: auto`).
"""

from __future__ import annotations

from typing import Any

import pytest

from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import MODEL, chat_body, serve
from tests.unit.test_custom_tools import prompt_of

# The shape of Claude Code 2.1's tool (its `maxLength` as sent).
BASH_SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command to run."},
        "script": {"type": "string", "maxLength": 524288},
        "timeout": {"type": "number", "maximum": 600000},
    },
    "required": ["command"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}
ABSURD = {"type": "object", "properties": {"xs": {"type": "string", "maxLength": 10**12}}}


def requests(schema: dict[str, Any], strict: bool = False) -> dict[str, dict[str, Any]]:
    """One request per API, each with a tool taking `schema`."""
    strictness = {"strict": True} if strict else {}
    function = {"name": "Bash", "parameters": schema, **strictness}
    return {
        "/v1/chat/completions": chat_body(tools=[{"type": "function", "function": function}]),
        "/v1/responses": {
            "model": MODEL,
            "input": "Hi",
            "tools": [{"type": "function", **function}],
        },
        "/v1/messages": {
            "model": MODEL,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "Hi"}],
            "tools": [{"name": "Bash", "input_schema": schema}],
        },
    }


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
async def test_claude_codes_tool_passes(path: str) -> None:
    engine = FakeEngine()
    async with serve(engine) as client:
        reply = await client.post(path, json=requests(BASH_SCHEMA)[path])
    assert reply.status_code == 200, reply.text
    assert '"maxLength": 524288' in prompt_of(engine), "shown to the model as sent"


async def test_only_compiled_schemas_are_bounded() -> None:
    """A tool only shown to the model is bounded by the body size alone; Claude Code's
    bound passes even where it is compiled (`required`)."""
    shown_only = {"type": "object", "properties": {"xs": {"type": "array", "maxItems": 10**9}}}
    async with serve(FakeEngine()) as client:
        shown = await client.post(
            "/v1/chat/completions", json=requests(shown_only)["/v1/chat/completions"]
        )
        body = requests(BASH_SCHEMA)["/v1/chat/completions"]
        required = await client.post(
            "/v1/chat/completions", json={**body, "tool_choice": "required"}
        )
    assert shown.status_code == 200, shown.text
    assert required.status_code == 200, required.text


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/v1/chat/completions", "tools[0].function.parameters.properties.xs.maxLength"),
        ("/v1/responses", "tools[0].parameters.properties.xs.maxLength"),
    ],
)
async def test_an_absurd_bound_in_a_strict_tool_is_refused_by_name(path: str, param: str) -> None:
    engine = FakeEngine()
    async with serve(engine) as client:
        reply = await client.post(path, json=requests(ABSURD, strict=True)[path])
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == param
    assert "'maxLength' is 1000000000000" in error["message"]
    assert engine.calls == []


async def test_an_absurd_bound_in_a_forced_or_response_format_schema_is_refused() -> None:
    async with serve(FakeEngine()) as client:
        forced = requests(ABSURD)["/v1/chat/completions"]
        forced["tool_choice"] = {"type": "function", "function": {"name": "Bash"}}
        named = await client.post("/v1/chat/completions", json=forced)
        text_format = await client.post(
            "/v1/responses",
            json={
                "model": MODEL,
                "input": "Hi",
                "text": {"format": {"type": "json_schema", "name": "x", "schema": ABSURD}},
            },
        )
    assert named.status_code == 400
    assert named.json()["error"]["param"] == "tools[0].function.parameters.properties.xs.maxLength"
    assert text_format.status_code == 400
    assert text_format.json()["error"]["param"] == "text.format.schema.properties.xs.maxLength"
