"""Streamed answers over HTTP (in-process): SSE framing and OpenAI's chunk sequence."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from oai_server.engine.fake import FakeEngine, FakeTokenizer
from tests.unit.conftest import MODEL, chat_body, serve

DONE = "[DONE]"


def sse_data(response: httpx.Response) -> list[str]:
    """The `data:` payloads of an SSE body, checking the framing as a strict client would."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    text = response.text
    assert text.endswith("\n\n")
    payloads = []
    for block in text[:-2].split("\n\n"):
        assert block.startswith("data: "), block
        assert "\n" not in block, block
        payloads.append(block[len("data: ") :])
    return payloads


def chunks_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON chunks of a stream that ends with exactly one `[DONE]`, and nothing after it."""
    payloads = sse_data(response)
    assert payloads[-1] == DONE
    assert payloads.count(DONE) == 1
    return [json.loads(p) for p in payloads[:-1]]


async def stream_chat(client: httpx.AsyncClient, **fields: Any) -> list[dict[str, Any]]:
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True, **fields))
    return chunks_of(response)


def content_of(chunks: list[dict[str, Any]], index: int = 0) -> str:
    return "".join(
        c["delta"].get("content") or ""
        for chunk in chunks
        for c in chunk["choices"]
        if c["index"] == index
    )


def finish_chunks(chunks: list[dict[str, Any]], index: int = 0) -> list[dict[str, Any]]:
    return [
        c
        for chunk in chunks
        for c in chunk["choices"]
        if c["index"] == index and c["finish_reason"]
    ]


def prompt_tokens(content: str) -> int:
    """What the fake engine counts for a one-user-message conversation."""
    tokenizer = FakeTokenizer()
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True
    )
    return len(tokenizer.encode(text, add_special_tokens=False))


async def test_chat_stream_sequence(client: httpx.AsyncClient, engine: FakeEngine) -> None:
    chunks = await stream_chat(client)
    first = chunks[0]["choices"][0]
    assert first["index"] == 0
    assert first["delta"]["role"] == "assistant"
    assert first["finish_reason"] is None
    # Only the first event of a choice says who speaks.
    assert all("role" not in c["delta"] for chunk in chunks[1:] for c in chunk["choices"])
    assert content_of(chunks) == engine.reply
    # The end is its own chunk: an empty delta and the reason.
    last = chunks[-1]["choices"]
    assert last == [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]
    assert all(c["finish_reason"] is None for chunk in chunks[:-1] for c in chunk["choices"])
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == MODEL
        assert "usage" not in chunk
        assert len(chunk["choices"]) == 1


async def test_one_id_and_created_across_the_stream(client: httpx.AsyncClient) -> None:
    chunks = await stream_chat(client)
    assert len(chunks) > 3
    assert len({c["id"] for c in chunks}) == 1
    assert len({c["created"] for c in chunks}) == 1
    assert chunks[0]["id"].startswith("chatcmpl-")
    other = await stream_chat(client)
    assert other[0]["id"] != chunks[0]["id"]


async def test_include_usage_adds_a_final_usage_chunk(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    chunks = await stream_chat(client, stream_options={"include_usage": True})
    *body, final = chunks
    assert all("usage" in c and c["usage"] is None for c in body)
    assert final["choices"] == []
    completion = len(engine.reply.split(" "))
    assert final["usage"] == {
        "prompt_tokens": prompt_tokens("Hi"),
        "completion_tokens": completion,
        "total_tokens": prompt_tokens("Hi") + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    }
    assert final["id"] == body[0]["id"]
    assert content_of(body) == engine.reply


async def test_usage_counts_every_choice(client: httpx.AsyncClient, engine: FakeEngine) -> None:
    chunks = await stream_chat(client, n=2, stream_options={"include_usage": True})
    usage = chunks[-1]["usage"]
    assert usage["prompt_tokens"] == prompt_tokens("Hi")
    assert usage["completion_tokens"] == 2 * len(engine.reply.split(" "))


async def test_include_usage_false_sends_no_usage(client: httpx.AsyncClient) -> None:
    chunks = await stream_chat(client, stream_options={"include_usage": False})
    assert all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"]


async def test_continuous_usage_stats_on_every_chunk(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    chunks = await stream_chat(
        client, stream_options={"include_usage": True, "continuous_usage_stats": True}
    )
    prompt = prompt_tokens("Hi")
    seen = 0
    for chunk in chunks:
        usage = chunk["usage"]
        assert usage is not None
        # The prompt is known before the first token: every chunk reports it, as vLLM does.
        assert usage["prompt_tokens"] == prompt, chunk
        assert usage["completion_tokens"] >= seen
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        seen = usage["completion_tokens"]
    assert chunks[-1]["choices"] == []
    assert seen == len(engine.reply.split(" "))


async def test_forced_usage_streams_usage_without_asking(engine: FakeEngine) -> None:
    # --enable-force-include-usage: as vLLM's should_include_usage, each chunk and a last one.
    async with serve(engine, enable_force_include_usage=True) as client:
        chunks = await stream_chat(client)
        text = await client.post(
            "/v1/completions",
            json={"model": MODEL, "prompt": "Hi", "max_tokens": 4, "stream": True},
        )
        whole = await client.post("/v1/chat/completions", json=chat_body())
    assert all(chunk["usage"]["prompt_tokens"] == prompt_tokens("Hi") for chunk in chunks)
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == len(engine.reply.split(" "))
    completion_chunks = chunks_of(text)
    assert all(chunk["usage"] is not None for chunk in completion_chunks)
    assert completion_chunks[-1]["choices"] == []
    assert whole.json()["usage"]["completion_tokens"] == len(engine.reply.split(" "))


async def test_n_choices_each_get_role_content_and_finish(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    chunks = await stream_chat(client, n=2)
    for index in (0, 1):
        mine = [c for chunk in chunks for c in chunk["choices"] if c["index"] == index]
        assert mine[0]["delta"]["role"] == "assistant"
        assert content_of(chunks, index) == engine.reply
        assert [c["finish_reason"] for c in finish_chunks(chunks, index)] == ["stop"]
        assert mine[-1]["finish_reason"] == "stop"
    assert {c["index"] for chunk in chunks for c in chunk["choices"]} == {0, 1}


@pytest.mark.parametrize("stop", ["How", ["can", "How"]])
async def test_stop_string_is_not_included(
    client: httpx.AsyncClient, engine: FakeEngine, stop: str | list[str]
) -> None:
    chunks = await stream_chat(client, stop=stop)
    expected = engine.reply[: engine.reply.index("How")]
    assert content_of(chunks) == expected
    assert "How" not in content_of(chunks)
    [finish] = finish_chunks(chunks)
    assert finish["finish_reason"] == "stop"
    assert finish["stop_reason"] == "How"


async def test_max_tokens_gives_length(client: httpx.AsyncClient, engine: FakeEngine) -> None:
    chunks = await stream_chat(client, max_tokens=1)
    assert content_of(chunks) == engine.reply.split(" ")[0]
    assert [c["finish_reason"] for c in finish_chunks(chunks)] == ["length"]


async def test_max_completion_tokens_wins_over_max_tokens(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    chunks = await stream_chat(client, max_tokens=1, max_completion_tokens=2)
    assert content_of(chunks) == " ".join(engine.reply.split(" ")[:2])
    assert [c["finish_reason"] for c in finish_chunks(chunks)] == ["length"]


async def test_empty_tokens_are_not_sent_as_content_chunks() -> None:
    engine = FakeEngine(tokens=["A", "", "B"])
    async with serve(engine) as client:
        chunks = await stream_chat(client)
    assert content_of(chunks) == "AB"
    deltas = [c["delta"] for chunk in chunks[1:-1] for c in chunk["choices"]]
    assert deltas == [{"content": "A"}, {"content": "B"}]


async def test_non_streamed_answer_matches_the_stream(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    response = await client.post("/v1/chat/completions", json=chat_body())
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["message"]["content"] == engine.reply
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"]["prompt_tokens"] == prompt_tokens("Hi")


# --- /v1/completions ---------------------------------------------------------


async def stream_completion(client: httpx.AsyncClient, **fields: Any) -> list[dict[str, Any]]:
    body = {"model": MODEL, "prompt": "Say hi", "stream": True, **fields}
    return chunks_of(await client.post("/v1/completions", json=body))


async def test_completion_stream(client: httpx.AsyncClient, engine: FakeEngine) -> None:
    chunks = await stream_completion(client, max_tokens=100)
    assert all(c["object"] == "text_completion" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert len({c["created"] for c in chunks}) == 1
    assert chunks[0]["id"].startswith("cmpl-")
    assert "".join(c["choices"][0]["text"] for c in chunks) == engine.reply
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "stop"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert all("usage" not in c for c in chunks)


async def test_completion_stream_default_max_tokens_is_16() -> None:
    engine = FakeEngine(reply="w " * 40)
    async with serve(engine) as client:
        chunks = await stream_completion(client)
    assert sum(len(c["choices"]) for c in chunks) == 16
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


async def test_completion_stream_usage(client: httpx.AsyncClient, engine: FakeEngine) -> None:
    chunks = await stream_completion(client, stream_options={"include_usage": True})
    *body, final = chunks
    assert all(c["usage"] is None for c in body)
    assert final["choices"] == []
    completion = len(engine.reply.split(" "))
    assert final["usage"] == {
        "prompt_tokens": len(b"Say hi"),
        "completion_tokens": completion,
        "total_tokens": len(b"Say hi") + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    }


async def test_completion_stream_several_prompts(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    chunks = await stream_completion(client, prompt=["a", "b"], n=2, stop="can")
    expected = engine.reply[: engine.reply.index("can")]
    for index in range(4):
        text = "".join(
            c["text"] for chunk in chunks for c in chunk["choices"] if c["index"] == index
        )
        assert text == expected
        reasons = [
            c["finish_reason"]
            for chunk in chunks
            for c in chunk["choices"]
            if c["index"] == index and c["finish_reason"]
        ]
        assert reasons == ["stop"]
