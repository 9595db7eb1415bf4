"""SSE templates: every light event's bytes are those of its typed chunk, serialized."""

from __future__ import annotations

import pytest

from oai_server.engine.fake import FakeEngine
from oai_server.http.templates import LightEvents, event, json_text
from oai_server.services.chat import ChatService
from oai_server.services.common import StreamSettings
from oai_server.services.completions import CompletionService
from oai_server.services.events import (
    ArgumentsDelta,
    Chunks,
    Finish,
    Light,
    Opening,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from schemas.common import ResponseModel

TEXTS = [
    "",
    "Hello",
    ' "quoted" \\ back',
    "line\nbreak\ttab",
    "é 中文 🙂",
    "\x00\x1f\u2028",
    "987654321",
    "987654320",
    "\x00oai-id\x00",
]
OPTIONS = [StreamSettings(False, False), StreamSettings(True, False)]


def chat_chunks(
    opts: StreamSettings, tier: str | None = None, identity: tuple[str, int] = ("chatcmpl-1", 17)
) -> Chunks[ResponseModel]:
    service = ChatService(FakeEngine(), "m")
    return service.chunks(identity, "m", opts, tier)


def completion_chunks(opts: StreamSettings) -> Chunks[ResponseModel]:
    service = CompletionService(FakeEngine(), "m")
    return service.chunks(("cmpl-1", 1700000000), "m", opts)


USAGES = [Usage(30, 16, 0), Usage(0, 0, 0), Usage(987654322, 987654323, 987654324), Usage(7, 1, 7)]


def encoded(light: LightEvents, item: Light) -> bytes:
    if isinstance(item, TextDelta):
        around = light.text_around(item.index)
        assert around is not None
        return around[0] + json_text(item.text) + around[1]
    if isinstance(item, ReasoningDelta):
        around = light.reasoning_around(item.index)
        assert around is not None
        return around[0] + json_text(item.text) + around[1]
    if isinstance(item, ArgumentsDelta):
        return light.arguments(item)
    return light.encode(item)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("index", [0, 3, 127])
@pytest.mark.parametrize("opts", OPTIONS)
def test_chat_text_events_match_typed_chunks(text: str, index: int, opts: StreamSettings) -> None:
    chunks = chat_chunks(opts)
    item = TextDelta(index, text)
    assert encoded(LightEvents(chunks), item) == event(chunks.of(item))


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("index", [0, 3])
@pytest.mark.parametrize("tier", [None, "flex"])
def test_chat_reasoning_events_match_typed_chunks(text: str, index: int, tier: str | None) -> None:
    chunks = chat_chunks(StreamSettings(True, False), tier)
    item = ReasoningDelta(index, text)
    light = LightEvents(chunks)
    assert encoded(light, item) == event(chunks.of(item))
    assert b'"reasoning":' + json_text(text) in encoded(light, item)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize(("index", "call"), [(0, 0), (3, 1), (0, 987654321)])
@pytest.mark.parametrize("opts", OPTIONS)
def test_chat_call_arguments_match_typed_chunks(
    text: str, index: int, call: int, opts: StreamSettings
) -> None:
    chunks = chat_chunks(opts, "flex")
    item = ArgumentsDelta(index, call, text)
    light = LightEvents(chunks)
    assert encoded(light, item) == event(chunks.of(item))
    assert b'"index":%d,"function":{"arguments":%s}' % (call, json_text(text)) in encoded(
        light, item
    )


@pytest.mark.parametrize("opts", OPTIONS)
@pytest.mark.parametrize("tier", [None, "flex"])
@pytest.mark.parametrize("index", [0, 2])
def test_chat_openings_and_finishes_match_typed_chunks(
    opts: StreamSettings, tier: str | None, index: int
) -> None:
    chunks = chat_chunks(opts, tier)
    light = LightEvents(chunks)
    for item in (Opening(index), Finish(index, "stop"), Finish(index, "length")):
        assert encoded(light, item) == event(chunks.of(item))
    assert b'"finish_reason":"length"' in light.encode(Finish(index, "length"))
    assert b'"role":"assistant"' in light.encode(Opening(index))


@pytest.mark.parametrize("usage", USAGES)
@pytest.mark.parametrize("tier", [None, "flex"])
def test_usage_events_match_typed_chunks(usage: Usage, tier: str | None) -> None:
    for chunks in (chat_chunks(StreamSettings(True, False), tier), completion_chunks(OPTIONS[1])):
        encoded_usage = LightEvents(chunks).encode(usage)
        assert encoded_usage == event(chunks.of(usage))
        assert b'"choices":[]' in encoded_usage
        total = usage.prompt_tokens + usage.completion_tokens
        assert b'"total_tokens":%d' % total in encoded_usage


def test_each_answer_gets_its_own_identity_in_a_shared_template() -> None:
    opts = StreamSettings(False, False)
    first = chat_chunks(opts, identity=("chatcmpl-a", 1))
    second = chat_chunks(opts, identity=("chatcmpl-b", 2))
    for item in (Opening(0), TextDelta(0, "hi"), Finish(0, "stop")):
        assert encoded(LightEvents(first), item) == event(first.of(item))
        assert encoded(LightEvents(second), item) == event(second.of(item))
        assert b'"id":"chatcmpl-b","object":"chat.completion.chunk","created":2' in encoded(
            LightEvents(second), item
        )


@pytest.mark.parametrize("identity", [("chatcmpl-987654320987654321", 987654321), ("x", 0)])
def test_an_identity_holding_the_markers_is_spliced_whole(identity: tuple[str, int]) -> None:
    chunks = chat_chunks(StreamSettings(True, False), identity=identity)
    light = LightEvents(chunks)
    for item in (Opening(1), TextDelta(1, "987654321"), Finish(1, "stop"), Usage(3, 2, 1)):
        assert encoded(light, item) == event(chunks.of(item))


def test_a_shape_whose_sample_holds_a_marker_is_built_from_its_chunks() -> None:
    # A model name with the `created` marker's digits: no clean template, typed chunks.
    service = ChatService(FakeEngine(), "m")
    chunks = service.chunks(("chatcmpl-1", 5), "model-987654320", StreamSettings(False, False))
    light = LightEvents(chunks)
    assert light.text_around(0) is None
    for item in (Opening(0), Finish(0, "stop"), Usage(1, 2, 0)):
        assert light.encode(item) == event(chunks.of(item))


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("opts", OPTIONS)
def test_completion_text_and_finish_events_match_typed_chunks(
    text: str, opts: StreamSettings
) -> None:
    chunks = completion_chunks(opts)
    light = LightEvents(chunks)
    for item in (TextDelta(5, text), Finish(5, "length")):
        assert encoded(light, item) == event(chunks.of(item))
