"""Custom tools and `allowed_tools` on chat completions, with a scripted engine.

A custom tool is shown to the model as a function of one string, `input`; the model's
call of it comes back as `tool_calls[].type == "custom"` with its input decoded from the
arguments. Forced by name, the model writes the input itself, under the tool's grammar.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from oai_server.dialects.tool_calls.custom import CustomInputs
from oai_server.dialects.tool_calls.parsers import CallArguments, CallStart, HermesCalls
from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import chat_body, serve
from tests.unit.test_tool_calls import WEATHER, feed_in_pieces, stream_events

PATCH = '*** Begin Patch\n*** Add File: a.txt\n+say "hi" \\ ü 😀\n*** End Patch'
GRAMMAR = 'start: "*** Begin Patch" /(.|\\n)*/ "*** End Patch"'
APPLY_PATCH = {
    "type": "custom",
    "custom": {
        "name": "apply_patch",
        "description": "Edit files.",
        "format": {"type": "grammar", "grammar": {"syntax": "lark", "definition": GRAMMAR}},
    },
}
CALL = json.dumps({"name": "apply_patch", "arguments": {"input": PATCH}})


def hermes_call(body: str) -> list[str]:
    """A reply that calls a tool, in pieces of 5 characters (a call's JSON split anywhere)."""
    text = f"Patching. <tool_call>{body}</tool_call>"
    return [text[i : i + 5] for i in range(0, len(text), 5)]


def prompt_of(engine: FakeEngine, index: int = -1) -> str:
    return bytes(engine.calls[index].prompt_token_ids).decode()


async def test_a_custom_tool_is_offered_as_a_function_of_one_string() -> None:
    engine = FakeEngine()
    async with serve(engine) as client:
        reply = await client.post("/v1/chat/completions", json=chat_body(tools=[APPLY_PATCH]))
    assert reply.status_code == 200, reply.text
    prompt = prompt_of(engine)
    shown = next(
        json.loads(line) for line in prompt.splitlines() if line.startswith('{"type": "function"')
    )
    function = shown["function"]
    assert function["name"] == "apply_patch"
    assert function["parameters"]["properties"] == {"input": {"type": "string"}}
    assert function["description"].startswith("Edit files.\n\nThe input must match this Lark")
    assert GRAMMAR in function["description"]


async def test_a_custom_call_is_answered_as_a_custom_tool_call() -> None:
    async with serve(FakeEngine(tokens=hermes_call(CALL))) as client:
        reply = await client.post("/v1/chat/completions", json=chat_body(tools=[APPLY_PATCH]))
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Patching. "
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "custom"
    assert call["id"].startswith("call_")
    assert call["custom"] == {"name": "apply_patch", "input": PATCH}
    assert "function" not in call


async def test_a_custom_call_streams_its_input() -> None:
    async with serve(FakeEngine(tokens=hermes_call(CALL))) as client:
        reply = await client.post(
            "/v1/chat/completions", json=chat_body(tools=[APPLY_PATCH, WEATHER], stream=True)
        )
    deltas = [e["choices"][0]["delta"] for e in stream_events(reply.text) if e["choices"]]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0]["type"] == "custom"
    assert calls[0]["custom"]["name"] == "apply_patch"
    assert all(set(c) == {"index", "custom"} for c in calls[1:])
    assert "".join(c["custom"]["input"] for c in calls) == PATCH


@pytest.mark.parametrize(
    ("syntax", "field"), [("lark", "grammar"), ("regex", "regex")], ids=["lark", "regex"]
)
async def test_a_forced_custom_tool_decodes_under_its_grammar(syntax: str, field: str) -> None:
    tool: dict[str, Any] = json.loads(json.dumps(APPLY_PATCH))
    tool["custom"]["format"]["grammar"]["syntax"] = syntax
    engine = FakeEngine(reply=PATCH)
    choice = {"type": "custom", "custom": {"name": "apply_patch"}}
    async with serve(engine) as client:
        reply = await client.post(
            "/v1/chat/completions", json=chat_body(tools=[tool, WEATHER], tool_choice=choice)
        )
    structured = engine.calls[0].options.structured
    assert structured is not None
    assert getattr(structured, field) == GRAMMAR
    (call,) = reply.json()["choices"][0]["message"]["tool_calls"]
    assert call["custom"] == {"name": "apply_patch", "input": PATCH}
    assert "<tool_call>" not in prompt_of(engine), "forced: no call format to follow"


async def test_a_custom_call_and_its_output_go_back_to_the_model() -> None:
    engine = FakeEngine()
    messages = [
        {"role": "user", "content": "Add a.txt"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "custom",
                    "custom": {"name": "apply_patch", "input": PATCH},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Done."},
    ]
    async with serve(engine) as client:
        reply = await client.post(
            "/v1/chat/completions", json=chat_body(messages=messages, tools=[APPLY_PATCH])
        )
    assert reply.status_code == 200, reply.text
    # Shown as the call of the function the tool is offered as.
    written = json.dumps({"name": "apply_patch", "arguments": {"input": PATCH}}, ensure_ascii=False)
    assert written in prompt_of(engine)


async def test_allowed_tools_offers_only_those_named() -> None:
    engine = FakeEngine()
    allowed = {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "required",
            "tools": [{"type": "function", "function": {"name": "get_weather"}}],
        },
    }
    async with serve(engine) as client:
        reply = await client.post(
            "/v1/chat/completions",
            json=chat_body(tools=[APPLY_PATCH, WEATHER], tool_choice=allowed),
        )
        assert reply.status_code == 200, reply.text
        assert "apply_patch" not in prompt_of(engine)
        structured = engine.calls[-1].options.structured
        assert structured is not None
        assert structured.json_schema is not None
        names = [i["properties"]["name"] for i in structured.json_schema["items"]["anyOf"]]
        assert names == [{"const": "get_weather"}]
        allowed["allowed_tools"]["mode"] = "auto"
        await client.post(
            "/v1/chat/completions",
            json=chat_body(tools=[APPLY_PATCH, WEATHER], tool_choice=allowed),
        )
        assert engine.calls[-1].options.structured is None
        assert "apply_patch" not in prompt_of(engine)
        assert "get_weather" in prompt_of(engine)
        allowed["allowed_tools"]["tools"] = [{"type": "custom", "custom": {"name": "nope"}}]
        refused = await client.post(
            "/v1/chat/completions",
            json=chat_body(tools=[APPLY_PATCH, WEATHER], tool_choice=allowed),
        )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "tool_choice.allowed_tools.tools[0]"
    assert "'nope'" in error["message"]


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_the_input_is_decoded_from_the_arguments_as_they_stream(size: int) -> None:
    parser = CustomInputs(HermesCalls(), frozenset({"apply_patch"}))
    events = feed_in_pieces(parser, f"<tool_call>{CALL}</tool_call>", size)
    (start,) = [e for e in events if isinstance(e, CallStart)]
    assert start.custom
    assert start.name == "apply_patch"
    texts = [e.text for e in events if isinstance(e, CallArguments)]
    assert all(isinstance(e, CallStart) or e.custom for e in events)
    assert "".join(texts) == PATCH


@pytest.mark.parametrize(
    ("arguments", "written"), [("*** Begin Patch", "*** Begin Patch"), ({"n": 1}, '{"n": 1}')]
)
def test_arguments_of_another_shape_are_the_input_as_written(
    arguments: object, written: str
) -> None:
    parser = CustomInputs(HermesCalls(), frozenset({"apply_patch"}))
    body = json.dumps({"name": "apply_patch", "arguments": arguments})
    events = feed_in_pieces(parser, f"<tool_call>{body}</tool_call>", 3)
    assert "".join(e.text for e in events if isinstance(e, CallArguments)) == written
