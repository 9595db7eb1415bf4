"""SSE framing: templated text events are byte-identical to serialized typed chunks."""

from __future__ import annotations

import pytest

from oai_server.http.sse import TextEvents, event
from schemas.chat import (
    ChatCompletionChunkChoice,
    ChatCompletionDelta,
    CreateChatCompletionStreamResponse,
)
from schemas.completions import CompletionChoice, CreateCompletionResponse


def chat_chunk(index: int, text: str, usage_null: bool) -> CreateChatCompletionStreamResponse:
    out = CreateChatCompletionStreamResponse(
        id="chatcmpl-1",
        created=1700000000,
        model="m",
        choices=[
            ChatCompletionChunkChoice(
                index=index,
                delta=ChatCompletionDelta(content=text),
                logprobs=None,
                finish_reason=None,
            )
        ],
    )
    if usage_null:
        out.usage = None
    return out


def completion_chunk(index: int, text: str) -> CreateCompletionResponse:
    choice = CompletionChoice(index=index, text=text, logprobs=None, finish_reason=None)
    return CreateCompletionResponse(id="cmpl-1", created=1, model="m", choices=[choice])


TEXTS = [
    "",
    "Hello",
    ' "quoted" \\ back',
    "line\nbreak\ttab",
    "é 中文 🙂",
    "\x00\x1f\u2028",
    "987654321",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("index", [0, 3, 127])
@pytest.mark.parametrize("usage_null", [False, True])
def test_chat_text_events_match_typed_chunks(text: str, index: int, usage_null: bool) -> None:
    events = TextEvents(lambda i, t: chat_chunk(i, t, usage_null))
    assert events(index, text) == event(chat_chunk(index, text, usage_null))


@pytest.mark.parametrize("text", TEXTS)
def test_completion_text_events_match_typed_chunks(text: str) -> None:
    events = TextEvents(completion_chunk)
    assert events(5, text) == event(completion_chunk(5, text))
