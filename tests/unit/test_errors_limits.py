"""Errors from limits, keys and the engine's state: the right status, OpenAI's envelope."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import MODEL, chat_body, serve
from tests.unit.error_helpers import CHAT, assert_still_serves, error_of, raw_serve

# --- limits, keys, engine state ----------------------------------------------


async def test_body_too_large() -> None:
    async with serve(FakeEngine(), max_request_bytes=1000) as client:
        big = chat_body(messages=[{"role": "user", "content": "x" * 2000}])
        error = error_of(await client.post(CHAT, json=big), 413)
        assert error["type"] == "invalid_request_error"

        # Without a Content-Length (chunked upload) the limit still holds.
        async def chunks() -> AsyncIterator[bytes]:
            data = json.dumps(big).encode()
            for i in range(0, len(data), 256):
                yield data[i : i + 256]

        chunked = await client.post(
            CHAT, content=chunks(), headers={"content-type": "application/json"}
        )
        error_of(chunked, 413)
        await assert_still_serves(client)


async def test_api_key() -> None:
    async with serve(FakeEngine(), api_key="k") as client:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "k"}):
            response = await client.post(CHAT, json=chat_body(), headers=headers)
            error = error_of(response, 401)
            assert error["code"] == "invalid_api_key"
        error_of(await client.get("/v1/models"), 401)
        assert (await client.get("/health")).status_code == 200
        ok = await client.post(CHAT, json=chat_body(), headers={"authorization": "Bearer k"})
        assert ok.status_code == 200
        models = await client.get("/v1/models", headers={"authorization": "Bearer k"})
        assert models.json()["data"][0]["id"] == MODEL


async def test_engine_not_started_yet() -> None:
    engine = FakeEngine(start_delay=5)
    async with raw_serve(engine, ready=False) as client:
        health = error_of(await client.get("/health"), 503)
        assert health["type"] == "service_unavailable"
        error = error_of(await client.post(CHAT, json=chat_body()), 503)
        assert error["code"] == health["code"]
        streamed = await client.post(CHAT, json=chat_body(stream=True))
        error_of(streamed, 503)
        assert engine.calls == []


async def test_engine_failing_at_admission_is_503_not_a_stream() -> None:
    engine = FakeEngine(fail_at_step=0)
    async with serve(engine) as client:
        response = await client.post(CHAT, json=chat_body(stream=True))
        error = error_of(response, 503)
        assert error["type"] == "service_unavailable"
        assert not response.headers["content-type"].startswith("text/event-stream")
        # The engine is dead now: health says so too.
        error_of(await client.get("/health"), 503)


async def test_engine_failing_mid_stream_ends_with_an_error_event() -> None:
    engine = FakeEngine(fail_at_step=3)
    async with serve(engine) as client:
        response = await client.post(CHAT, json=chat_body(stream=True))
    assert response.status_code == 200
    events = [e.removeprefix("data: ") for e in response.text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    assert events.count("[DONE]") == 1
    chunks = [json.loads(e) for e in events[:-1]]
    errors = [c for c in chunks if "error" in c]
    assert len(errors) == 1
    assert chunks[-1] is errors[0]
    assert set(errors[0]["error"]) == {"message", "type", "param", "code"}
    assert errors[0]["error"]["type"] == "service_unavailable"
    content = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1] if c["choices"]
    )
    # Steps 0, 1 and 2 arrived (one word each) before step 3 failed.
    assert content == " ".join(engine.reply.split(" ")[:3])


async def test_engine_failing_mid_answer_is_503() -> None:
    engine = FakeEngine(fail_at_step=3)
    async with serve(engine) as client:
        error = error_of(await client.post(CHAT, json=chat_body()), 503)
    assert error["type"] == "service_unavailable"


@pytest.mark.parametrize("stream", [False, True])
async def test_unexpected_exception_is_a_plain_500(stream: bool) -> None:
    engine = FakeEngine(fail_at_step=0, fault=RuntimeError("secret traceback detail"))
    async with raw_serve(engine, ready=True) as client:
        response = await client.post(CHAT, json=chat_body(stream=stream))
        error = error_of(response, 500)
        assert error["type"] == "server_error"
        assert "secret" not in response.text
        assert "Traceback" not in response.text
        assert "RuntimeError" not in response.text
        engine.fail_at_step = None
        await assert_still_serves(client)


async def test_unexpected_exception_mid_stream_hides_its_text() -> None:
    engine = FakeEngine(fail_at_step=2, fault=RuntimeError("secret traceback detail"))
    async with raw_serve(engine, ready=True) as client:
        body = {"model": MODEL, "prompt": "x", "stream": True}
        response = await client.post("/v1/completions", json=body)
    assert response.status_code == 200
    assert "secret" not in response.text
    assert "Traceback" not in response.text
    *_, last, done = [e for e in response.text.split("\n\n") if e]
    assert json.loads(last.removeprefix("data: "))["error"]["type"] == "server_error"
    assert done == "data: [DONE]"


@pytest.mark.parametrize(
    ("reason", "status", "error_type"),
    [("error", 500, "server_error"), ("abort", 503, "service_unavailable")],
)
@pytest.mark.parametrize("path", [CHAT, "/v1/completions"])
async def test_a_request_the_engine_failed_is_an_error_not_an_answer(
    path: str, reason: str, status: int, error_type: str
) -> None:
    engine = FakeEngine(reply="partial answer", finish_reason=reason)  # type: ignore[arg-type]
    body = chat_body() if path == CHAT else {"model": MODEL, "prompt": "x"}
    async with serve(engine) as client:
        error = error_of(await client.post(path, json=body), status)
        assert error["type"] == error_type
        streamed = await client.post(path, json={**body, "stream": True})
    assert streamed.status_code == 200
    *chunks, last, done = [e.removeprefix("data: ") for e in streamed.text.split("\n\n") if e]
    assert done == "[DONE]"
    assert json.loads(last)["error"]["type"] == error_type
    # No chunk claims the answer ended normally.
    assert all(c.get("finish_reason") is None for e in chunks for c in json.loads(e)["choices"])


async def test_errors_do_not_break_later_requests(client: httpx.AsyncClient) -> None:
    error_of(
        await client.post(CHAT, content=b"{", headers={"content-type": "application/json"}), 400
    )
    error_of(await client.post(CHAT, json=chat_body(model="nope")), 404)
    error_of(await client.post(CHAT, json=chat_body(tool_choice="required")), 400)
    error_of(await client.get("/v1/chat"), 404)
    await assert_still_serves(client)
    stream = await client.post(CHAT, json=chat_body(stream=True))
    assert stream.text.endswith("data: [DONE]\n\n")


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (CHAT, chat_body(max_tokens=0), "max_tokens"),
        (CHAT, chat_body(max_completion_tokens=0, stream=True), "max_completion_tokens"),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 0}, "max_tokens"),
    ],
)
async def test_zero_max_tokens_is_a_400_naming_it(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], param: str
) -> None:
    # One rule: an answer of no tokens is refused by name, before any stream starts;
    # only `echo` gives `max_tokens: 0` a meaning (score the prompt), and is a 200
    # (tests/integration/test_openai_features.py scores one on the real engine).
    error = error_of(await client.post(path, json=body), 400)
    assert error["param"] == param


async def test_zero_max_tokens_with_echo_scores_the_prompt(client: httpx.AsyncClient) -> None:
    body = {"model": MODEL, "prompt": "x y", "max_tokens": 0, "echo": True}
    choice = (await client.post("/v1/completions", json=body)).json()["choices"][0]
    assert (choice["text"], choice["finish_reason"]) == ("x y", "length")
