"""Tool calls: the output parsers, and the wire format with a scripted engine.

The embedded 135M model cannot choose tools by itself, so `tool_choice: "auto"` is
tested here with a fake engine scripted to write what a tool-calling model writes
(`<tool_call>{json}</tool_call>`); `required` and named choices are also tested
against the real model in the integration suite.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from oai_server.dialects.tool_calls.parsers import (
    CallArguments,
    CallStart,
    Content,
    Event,
    HermesCalls,
    OutputParser,
    RequiredCalls,
)
from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import chat_body, serve

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def feed_in_pieces(parser: OutputParser, text: str, size: int) -> list[Event]:
    events: list[Event] = []
    for i in range(0, len(text), size):
        events += parser.feed(text[i : i + size])
    return events + parser.finish()


def arguments_of(events: list[Event], index: int) -> str:
    return "".join(e.text for e in events if isinstance(e, CallArguments) and e.index == index)


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_required_calls_stream_raw_arguments(size: int) -> None:
    text = (
        '[{"name": "get_weather", "parameters": {"city": "Paris \\"}{\\" x", "n": [1, {"a": 2}]}},'
        ' {"name":"get_time","parameters":{}}]'
    )
    events = feed_in_pieces(RequiredCalls(), text, size)
    starts = [e for e in events if isinstance(e, CallStart)]
    assert [s.name for s in starts] == ["get_weather", "get_time"]
    assert [s.index for s in starts] == [0, 1]
    assert len({s.id for s in starts}) == 2
    first = arguments_of(events, 0)
    assert json.loads(first) == {"city": 'Paris "}{" x', "n": [1, {"a": 2}]}
    assert arguments_of(events, 1) == "{}"
    assert not [e for e in events if isinstance(e, Content)]


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_hermes_splits_content_and_calls(size: int) -> None:
    text = (
        'Let me check. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n'
        '</tool_call> and <tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    )
    events = feed_in_pieces(HermesCalls(), text, size)
    content = "".join(e.text for e in events if isinstance(e, Content))
    assert content == "Let me check.  and "
    assert [e.name for e in events if isinstance(e, CallStart)] == ["get_weather", "get_time"]
    assert json.loads(arguments_of(events, 0)) == {"city": "Rome"}


def test_hermes_keeps_text_that_only_looks_like_a_tag() -> None:
    events = feed_in_pieces(HermesCalls(), "a <tool b <tool_call>not json</tool_call> c", 2)
    assert "".join(e.text for e in events if isinstance(e, Content)) == (
        "a <tool b <tool_call>not json</tool_call> c"
    )
    assert not [e for e in events if isinstance(e, CallStart)]


HERMES_REPLY = [
    "Sure.",
    " <tool_",
    "call>",
    '{"name": "get_weather", ',
    '"arguments": {"city": "Oslo"}}',
    "</tool_call>",
]


async def test_auto_tool_call_non_streamed() -> None:
    async with serve(FakeEngine(tokens=HERMES_REPLY)) as client:
        reply = await client.post("/v1/chat/completions", json=chat_body(tools=[WEATHER]))
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Sure. "
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function"
    assert call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}


def stream_events(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data: "))
        for line in text.split("\n\n")
        if line.startswith("data: {")
    ]


async def test_auto_tool_call_streams_as_openai_does() -> None:
    async with serve(FakeEngine(tokens=HERMES_REPLY)) as client:
        reply = await client.post(
            "/v1/chat/completions", json=chat_body(tools=[WEATHER], stream=True)
        )
    deltas = [e["choices"][0]["delta"] for e in stream_events(reply.text) if e["choices"]]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0]["index"] == 0
    assert calls[0]["id"].startswith("call_")
    assert calls[0]["type"] == "function"
    assert calls[0]["function"]["name"] == "get_weather"
    assert all(set(c) == {"index", "function"} for c in calls[1:])
    assert all(set(c["function"]) == {"arguments"} for c in calls[1:])
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert json.loads(arguments) == {"city": "Oslo"}
    finish = [e["choices"][0]["finish_reason"] for e in stream_events(reply.text) if e["choices"]]
    assert finish[-1] == "tool_calls"
    assert "".join(d.get("content") or "" for d in deltas) == "Sure. "


async def test_auto_refused_without_a_parser() -> None:
    async with serve(FakeEngine(), tool_call_parser="none") as client:
        reply = await client.post("/v1/chat/completions", json=chat_body(tools=[WEATHER]))
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "tool_choice"


async def test_required_choice_sends_a_grammar(
    engine: FakeEngine, client: httpx.AsyncClient
) -> None:
    await client.post(
        "/v1/chat/completions",
        json=chat_body(tools=[WEATHER], tool_choice="required", parallel_tool_calls=False),
    )
    structured = engine.calls[0].options.structured
    assert structured is not None
    assert structured.json_schema is not None
    schema = structured.json_schema
    assert schema["maxItems"] == 1
    item = schema["items"]["anyOf"][0]
    assert item["properties"]["name"] == {"const": "get_weather"}
