"""Anthropic's own SDK against the server: messages, streams, tools, token counts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from oai_server.anthropic import sse
from oai_server.engine.fake import FakeEngine
from tests.anthropic.conftest import MODEL, WEATHER, client, prompt_of, server
from tests.responses.conftest import CALL, weather_reply

HELLO = [{"role": "user", "content": "Hello?"}]


def test_create_and_stream_give_the_same_message() -> None:
    engine = FakeEngine(reply="Hi there, how are you?")
    with server(engine) as root:
        sdk = client(root)
        whole = sdk.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        with sdk.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            texts = list(stream.text_stream)
            streamed = stream.get_final_message()
        counted = sdk.messages.count_tokens(model=MODEL, messages=HELLO)

    assert whole.id.startswith("msg_")
    assert whole.type == "message"
    assert whole.role == "assistant"
    assert [(b.type, getattr(b, "text", None)) for b in whole.content] == [
        ("text", "Hi there, how are you?")
    ]
    assert (whole.stop_reason, whole.stop_sequence, whole.model) == ("end_turn", None, MODEL)
    assert whole.usage.output_tokens == 5
    assert whole.usage.input_tokens == counted.input_tokens == len(engine.calls[0].prompt_token_ids)
    assert "".join(texts) == "Hi there, how are you?"
    assert len(texts) == 5
    assert streamed.model_dump(exclude={"id"}) == whole.model_dump(exclude={"id"})


def test_stream_events_come_in_anthropics_order() -> None:
    engine = FakeEngine(reply="One two")
    body = {"model": MODEL, "max_tokens": 16, "messages": HELLO, "stream": True}
    with (
        server(engine) as root,
        httpx.stream("POST", f"{root}/v1/messages", json=body) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    data = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert [d["type"] for d in data] == names
    assert data[0]["message"]["content"] == []
    assert data[0]["message"]["stop_reason"] is None
    assert data[2]["content_block"] == {"type": "text", "text": ""}
    assert [d["delta"] for d in data[3:5]] == [
        {"type": "text_delta", "text": "One"},
        {"type": "text_delta", "text": " two"},
    ]
    assert data[6]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert data[6]["usage"]["output_tokens"] == 2


def test_pings_keep_a_waiting_stream_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse, "PING_INTERVAL_S", 0.05)
    engine = FakeEngine(reply="slow words", token_delay=0.3)
    body = {"model": MODEL, "max_tokens": 16, "messages": HELLO, "stream": True}
    with (
        server(engine) as root,
        httpx.stream("POST", f"{root}/v1/messages", json=body) as response,
    ):
        names = [line for line in response.iter_lines() if line.startswith("event: ")]
    between = names[names.index("event: content_block_delta") :]
    assert "event: ping" in between  # while the next token was awaited
    assert names[-1] == "event: message_stop"


def test_system_as_text_or_blocks_reaches_the_prompt() -> None:
    engine = FakeEngine()
    blocks = [
        {"type": "text", "text": "Be brief. ", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Answer in French."},
    ]
    with server(engine) as root:
        sdk = client(root)
        sdk.messages.create(model=MODEL, max_tokens=8, system="Be brief.", messages=HELLO)
        as_text = prompt_of(engine)
        sdk.messages.create(model=MODEL, max_tokens=8, system=blocks, messages=HELLO)  # type: ignore[arg-type]
        as_blocks = prompt_of(engine)
    assert as_text.startswith("<|system|>Be brief.\n<|user|>Hello?")
    assert as_blocks.startswith("<|system|>Be brief. Answer in French.\n<|user|>Hello?")


def test_stop_sequences_and_max_tokens() -> None:
    engine = FakeEngine(reply="one two three four")
    with server(engine) as root:
        sdk = client(root)
        stopped = sdk.messages.create(
            model=MODEL, max_tokens=16, messages=HELLO, stop_sequences=["three"]
        )
        cut = sdk.messages.create(model=MODEL, max_tokens=2, messages=HELLO)
    assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", "three")
    assert stopped.content[0].type == "text"
    assert stopped.content[0].text == "one two "
    assert (cut.stop_reason, cut.usage.output_tokens) == ("max_tokens", 2)


def test_automatic_tool_use_then_a_tool_result_turn(template: Path) -> None:
    engine = FakeEngine(reply_for=weather_reply)
    question = {"role": "user", "content": "Weather in Paris?"}
    with server(engine, chat_template=template) as root:
        sdk = client(root)
        called = sdk.messages.create(
            model=MODEL, max_tokens=64, messages=[question], tools=[WEATHER]
        )
        (use,) = called.content
        assert use.type == "tool_use"
        assert (use.name, use.input, called.stop_reason) == (
            "get_weather",
            {"city": "Paris"},
            "tool_use",
        )
        result = {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}
        answer = sdk.messages.create(
            model=MODEL,
            max_tokens=64,
            tools=[WEATHER],
            messages=[
                question,
                {"role": "assistant", "content": called.content},  # type: ignore[typeddict-item]
                {"role": "user", "content": [result]},  # type: ignore[list-item]
            ],
        )
    assert answer.content[0].type == "text"
    assert answer.content[0].text == "It is sunny in Paris."
    assert answer.stop_reason == "end_turn"
    assert f"<|tool|>sunny[for {use.id}]" in prompt_of(engine)
    assert '"get_weather", "arguments": {"city": "Paris"}}' in prompt_of(engine)


def test_forced_tool_use() -> None:
    engine = FakeEngine(reply='{"city": "Lyon"}')  # what decoding constrained to the schema gives
    with server(engine) as root:
        forced = client(root).messages.create(
            model=MODEL,
            max_tokens=64,
            messages=HELLO,
            tools=[WEATHER],  # type: ignore[list-item]
            tool_choice={"type": "tool", "name": "get_weather"},
        )
    (use,) = forced.content
    assert use.type == "tool_use"
    assert (use.name, use.input) == ("get_weather", {"city": "Lyon"})
    assert forced.stop_reason == "tool_use"
    assert engine.calls[0].options.structured is not None


def test_streamed_tool_input_arrives_as_input_json_delta() -> None:
    engine = FakeEngine(reply=f"Let me look. {CALL}")
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": HELLO,
        "tools": [WEATHER],
        "stream": True,
    }
    with server(engine) as root:
        with httpx.stream("POST", f"{root}/v1/messages", json=body) as response:
            data = [
                json.loads(line.removeprefix("data: "))
                for line in response.iter_lines()
                if line.startswith("data: ")
            ]
        with client(root).messages.stream(
            model=MODEL,
            max_tokens=64,
            messages=HELLO,
            tools=[WEATHER],  # type: ignore[list-item]
        ) as stream:
            final = stream.get_final_message()
    starts = [d["content_block"] for d in data if d["type"] == "content_block_start"]
    assert [s["type"] for s in starts] == ["text", "tool_use"]
    assert starts[1]["input"] == {}
    assert starts[1]["name"] == "get_weather"
    partial = "".join(
        d["delta"]["partial_json"]
        for d in data
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial) == {"city": "Paris"}
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"city": "Paris"}  # type: ignore[union-attr]
    assert final.stop_reason == "tool_use"


def test_models_list_in_anthropics_shape() -> None:
    with server(FakeEngine()) as root:
        listed = client(root).models.list()
        one = client(root).models.retrieve(MODEL)
        plain = httpx.get(f"{root}/v1/models").json()
    assert [m.id for m in listed.data] == [MODEL]
    assert (one.id, one.type) == (MODEL, "model")
    assert listed.data[0].type == "model"
    assert plain["object"] == "list"  # OpenAI's shape without `anthropic-version`


def test_earlier_thinking_blocks_and_unknown_fields_are_accepted() -> None:
    engine = FakeEngine(reply="Fine.")
    body = {
        "model": MODEL,
        "max_tokens": 1500,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "some_future_field": {"x": 1},
        "messages": [
            {"role": "user", "content": "Hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "They greet me.", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Hello!"},
                ],
            },
            {"role": "user", "content": "How are you?"},
        ],
    }
    with server(engine) as root:
        response = httpx.post(f"{root}/v1/messages", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["content"] == [{"type": "text", "text": "Fine."}]
    prompt = prompt_of(engine)
    assert "<|assistant|>Hello!\n<|user|>How are you?" in prompt
    assert "They greet me." not in prompt


def test_cache_metrics_and_request_ids_as_on_every_route() -> None:
    engine = FakeEngine(reply="Cached words.")
    body = {"model": MODEL, "max_tokens": 16, "messages": HELLO, "temperature": 0}
    with server(engine, response_cache="memory") as root:
        first = httpx.post(f"{root}/v1/messages", json=body)
        again = httpx.post(f"{root}/v1/messages", json={**body, "stream": True})
        metrics = httpx.get(f"{root}/metrics").text
    assert (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit")
    assert len(engine.calls) == 1
    deltas = [
        json.loads(line.removeprefix("data: "))
        for line in again.text.splitlines()
        if line.startswith('data: {"type":"content_block_delta"')
    ]
    assert "".join(d["delta"]["text"] for d in deltas) == first.json()["content"][0]["text"]
    assert first.json()["id"] == f"msg_{first.headers['x-request-id']}"
    assert 'route="/v1/messages"' in metrics


def test_a_client_that_leaves_mid_stream_aborts_the_engine_request() -> None:
    engine = FakeEngine(reply="many slow words " * 20, token_delay=0.05)
    body = {"model": MODEL, "max_tokens": 200, "messages": HELLO, "stream": True}
    with server(engine) as root:
        with httpx.stream("POST", f"{root}/v1/messages", json=body) as response:
            for line in response.iter_lines():
                if line.startswith("event: content_block_delta"):
                    break  # leave after the first token
        deadline = time.monotonic() + 5
        while not engine.aborted and time.monotonic() < deadline:
            time.sleep(0.02)
    assert engine.aborted == [engine.calls[0].request_id]
