"""A cache entry keeps a stream's events, light and typed, and reads back only its own."""

from __future__ import annotations

from typing import Any

import pydantic_core
import pytest

from oai_server.cache.entry import decode, encode
from oai_server.engine.fake import FakeEngine
from oai_server.services.chat import ChatService
from oai_server.services.common import StreamSettings
from oai_server.services.events import (
    ArgumentsDelta,
    Finish,
    Light,
    Opening,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from schemas.chat import CreateChatCompletionStreamResponse
from schemas.common import CompletionUsage, ResponseModel

USAGE = Usage(prompt_tokens=7, completion_tokens=3)


def restore(stored: dict[str, Any]) -> ResponseModel:
    return CreateChatCompletionStreamResponse.model_validate({**stored, "id": "", "created": 0})


def test_light_and_typed_events_come_back_as_they_went_in() -> None:
    chunks = ChatService(FakeEngine(), "m").chunks(
        ("chatcmpl-1", 5), "m", StreamSettings(False, False)
    )
    typed = chunks.of(TextDelta(1, "typed"))  # as a chunk with logprobs or a tool call goes
    events: list[Light | ResponseModel] = [
        Opening(0),
        Opening(1),
        TextDelta(0, 'a "b"'),
        typed,
        Finish(0, "length"),
    ]
    entry = decode(encode(events, USAGE), restore)
    assert entry is not None
    assert entry.events[:3] == events[:3]
    assert entry.events[4] == Finish(0, "length")
    back = entry.events[3]
    assert isinstance(back, CreateChatCompletionStreamResponse)
    assert back.choices[0].delta.content == "typed"
    assert (back.id, back.created) == ("", 0)  # a replay gives its own
    assert (entry.prompt_tokens, entry.completion_tokens) == (7, 3)


def test_thinking_comes_back_as_it_went_in() -> None:
    events: list[Light | ResponseModel] = [
        Opening(0),
        ReasoningDelta(0, 'so "x"'),
        TextDelta(0, "x"),
        Finish(0, "stop"),
    ]
    entry = decode(encode(events, USAGE), restore)
    assert entry is not None
    assert entry.events == events


def test_a_calls_arguments_come_back_as_they_went_in() -> None:
    events: list[Light | ResponseModel] = [
        Opening(0),
        ArgumentsDelta(0, 0, '{"city": "'),
        ArgumentsDelta(0, 1, 'Oslo"}'),
        Finish(0, "tool_calls"),
    ]
    entry = decode(encode(events, USAGE), restore)
    assert entry is not None
    assert entry.events == events


def test_the_usage_only_chunk_is_left_out() -> None:
    usage_chunk = CreateChatCompletionStreamResponse(
        id="chatcmpl-1",
        created=5,
        model="m",
        choices=[],
        usage=CompletionUsage(prompt_tokens=7, completion_tokens=3, total_tokens=10),
    )
    entry = decode(encode([Opening(0), usage_chunk], USAGE), restore)
    assert entry is not None
    assert entry.events == [Opening(0)]


@pytest.mark.parametrize(
    "raw",
    [
        {"format": 1, "events": [[0, "text"]], "usage": [1, 1]},  # an older server's entry
        {"format": 2, "events": [[0, "text"]], "usage": [1, 1]},
        {"format": 3, "events": [[0, 1, 2]], "usage": [1, 1]},
        {"format": 3, "events": [[0, "1", "x"]], "usage": [1, 1]},
        {"format": 3, "events": [[0, 1]], "usage": [1, 1]},
        {"format": 3, "events": [["0"]], "usage": [1, 1]},
        {"format": 3, "events": [[0, "x", "stop"]], "usage": [1, 1]},
        {"format": 3, "events": [[0, None, 3]], "usage": [1, 1]},
        {"format": 3, "events": [[]], "usage": [1, 1]},
        {"format": 3, "events": [[0, None, None, 3]], "usage": [1, 1]},
        {"format": 3, "events": [[0, None, "x", "y"]], "usage": [1, 1]},
    ],
)
def test_an_entry_of_another_format_or_malformed_is_a_miss(raw: dict[str, Any]) -> None:
    assert decode(pydantic_core.to_json(raw), restore) is None


def test_the_reasoning_tokens_are_kept_where_counted() -> None:
    entry = decode(encode([Opening(0)], Usage(7, 3, 0, 2)), restore)
    assert entry is not None
    assert (entry.counts.completion_tokens, entry.counts.reasoning_tokens) == (3, 2)
    plain = decode(encode([Opening(0)], USAGE), restore)
    assert plain is not None
    assert plain.counts.reasoning_tokens is None
