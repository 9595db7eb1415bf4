"""Server-sent event parsing and the per-chunk accounting of one stream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.client import ApiConfig, SSEParser, StreamReader, has_content
from benchmarks.records import RequestRecord
from benchmarks.workloads import RequestSpec

STREAM = (
    b": a comment\r\n"
    b'data: {"a": 1}\r\n\r\n'
    b"event: error\n"
    b'data: {"error": {"message": "boom"}}\n\n'
    b'data:{"b":\n'
    b"data: 2}\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    (b"", b'{"a": 1}'),
    (b"error", b'{"error": {"message": "boom"}}'),
    (b"", b'{"b":\n2}'),
    (b"", b"[DONE]"),
]


@pytest.mark.parametrize("size", [1, 2, 7, 1000])
def test_events_are_parsed_whatever_the_network_splits(size: int) -> None:
    parser = SSEParser()
    events = []
    for at in range(0, len(STREAM), size):
        events += parser.feed(STREAM[at : at + size])
    assert events == EXPECTED


def chat_chunk(content: str | None, completion_tokens: int | None = None, **delta: Any) -> bytes:
    chunk: dict[str, Any] = {"choices": [{"index": 0, "delta": {**delta}, "finish_reason": None}]}
    if content is not None:
        chunk["choices"][0]["delta"]["content"] = content
    if completion_tokens is not None:
        chunk["usage"] = {"prompt_tokens": 5, "completion_tokens": completion_tokens}
    return json.dumps(chunk).encode()


def test_the_role_chunk_is_not_content_and_usage_deltas_count_tokens() -> None:
    record = RequestRecord(send_time=0.0)
    reader = StreamReader(record, "chat")
    reader.on_event(b"", chat_chunk("", 0, role="assistant"), 0.1)
    reader.on_event(b"", chat_chunk("Hello", 1), 0.3)
    reader.on_event(b"", chat_chunk(" there, friend", 4), 0.5)
    reader.on_event(
        b"", json.dumps({"choices": [], "usage": {"completion_tokens": 4}}).encode(), 0.6
    )
    reader.on_event(b"", b"[DONE]", 0.6)
    assert record.chunk_times == [0.3, 0.5]
    assert record.chunk_tokens == [1, 3]
    assert record.completion_tokens == 4
    assert record.prompt_tokens == 5
    assert reader.done
    assert record.ok


def test_without_usage_each_content_chunk_counts_one_token() -> None:
    record = RequestRecord(send_time=0.0)
    reader = StreamReader(record, "completions")
    for at, text in ((0.1, "a"), (0.2, ""), (0.3, "bc")):
        reader.on_event(b"", json.dumps({"choices": [{"index": 0, "text": text}]}).encode(), at)
    assert record.chunk_times == [0.1, 0.3]
    assert record.chunk_tokens == [1, 1]
    assert record.completion_tokens is None
    assert record.output_tokens == 2


@pytest.mark.parametrize(
    ("event", "data", "kind"),
    [
        (b"error", b'{"message": "overloaded"}', "stream_error"),
        (b"", b'{"error": {"message": "engine died"}}', "stream_error"),
        (b"", b"not json", "protocol"),
        (b"", b"[1, 2]", "protocol"),
    ],
)
def test_errors_inside_a_stream(event: bytes, data: bytes, kind: str) -> None:
    record = RequestRecord(send_time=0.0)
    StreamReader(record, "chat").on_event(event, data, 0.1)
    assert record.error == kind


def test_reasoning_and_tool_calls_are_content() -> None:
    assert has_content({"delta": {"reasoning_content": "hmm"}}, "chat")
    assert has_content({"delta": {"tool_calls": [{"index": 0}]}}, "chat")
    assert not has_content({"delta": {"role": "assistant", "content": ""}}, "chat")
    assert has_content({"text": " x"}, "completions")


def test_request_bodies() -> None:
    spec = RequestSpec(prompt="hi", messages=[{"role": "user", "content": "hi"}], max_tokens=7)
    completions = ApiConfig("http://h/v1", "m").payload(spec)
    assert completions == {
        "model": "m",
        "stream": True,
        "max_tokens": 7,
        "prompt": "hi",
        "temperature": 0.0,
        "ignore_eos": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    plain = RequestSpec(
        messages=[{"role": "user", "content": "hi"}], ignore_eos=False, temperature=None
    )
    chat = ApiConfig(
        "http://h/v1", "m", api="chat", continuous_usage=False, extra_body={"top_p": 0.5}
    )
    body = chat.payload(plain)
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "ignore_eos" not in body
    assert "temperature" not in body
    assert "prompt" not in body
    assert body["stream_options"] == {"include_usage": True}
    assert body["top_p"] == 0.5
    assert chat.path == "/chat/completions"
