"""Every failure reaches the client in OpenAI's error envelope, with the right status."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.errors import OpenAIError
from oai_server.services.chat import ChatService
from oai_server.services.completions import CompletionService
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport
from tests.unit.conftest import MODEL, chat_body, serve

CHAT = "/v1/chat/completions"


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The error object of `response`, checked to be exactly OpenAI's envelope."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["type"], str)
    assert error["param"] is None or isinstance(error["param"], str)
    assert error["code"] is None or isinstance(error["code"], str)
    # FastAPI's own validation body never leaks through.
    assert "detail" not in response.text
    return error


@asynccontextmanager
async def raw_serve(engine: FakeEngine, *, ready: bool) -> AsyncIterator[httpx.AsyncClient]:
    """The app around `engine`; waits for the engine only if `ready`.

    Exceptions the app re-raises after answering (Starlette does so for a 500)
    stay inside, as with a real server, so the test sees the response.
    """
    app = create_app(Settings(), engine)
    async with app.router.lifespan_context(app):
        while ready:
            try:
                await engine.check_health()
            except OpenAIError:
                await asyncio.sleep(0.001)
            else:
                break
        inner = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        transport = AsyncValidatingTransport(transport=inner)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


async def assert_still_serves(client: httpx.AsyncClient) -> None:
    response = await client.post(CHAT, json=chat_body())
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"]


# --- request validation ------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"", b"[1, 2]", b'"just a string"', b"null", b'{"model": "m",'],
)
async def test_bodies_that_are_not_a_json_object(client: httpx.AsyncClient, content: bytes) -> None:
    response = await client.post(
        CHAT, content=content, headers={"content-type": "application/json"}
    )
    error = error_of(response, 400)
    assert error["type"] == "invalid_request_error"
    await assert_still_serves(client)


async def test_missing_messages(client: httpx.AsyncClient) -> None:
    error = error_of(await client.post(CHAT, json={"model": MODEL}), 400)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "messages"
    assert "messages" in error["message"]


async def test_missing_message_content(client: httpx.AsyncClient) -> None:
    body = chat_body(messages=[{"role": "user"}])
    error = error_of(await client.post(CHAT, json=body), 400)
    assert error["param"] == "messages[0].content"
    assert error["code"] == "missing_required_parameter"


async def test_missing_prompt_in_completions(client: httpx.AsyncClient) -> None:
    error = error_of(await client.post("/v1/completions", json={"model": MODEL}), 400)
    assert error["param"] == "prompt"


async def test_wrong_prompt_type_in_completions(client: httpx.AsyncClient) -> None:
    body = {"model": MODEL, "prompt": 5}
    error = error_of(await client.post("/v1/completions", json=body), 400)
    assert error["param"] == "prompt"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"max_tokens": "5"}, "max_tokens"),
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": 3}, "temperature"),
        ({"n": 0}, "n"),
        ({"stream": "yes"}, "stream"),
        ({"messages": [{"role": "wizard", "content": "Hi"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": 7}]}, "messages[0].content"),
        ({"messages": [{"role": "assistant", "content": 7}]}, "messages[0].content"),
        ({"messages": []}, "messages"),
        ({"stop": 5}, "stop"),
        ({"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
    ],
)
async def test_wrong_types_and_values(
    client: httpx.AsyncClient, engine: FakeEngine, fields: dict[str, Any], param: str
) -> None:
    error = error_of(await client.post(CHAT, json=chat_body(**fields)), 400)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert param.split("[")[0] in error["message"]
    assert engine.calls == []


async def test_unknown_model(client: httpx.AsyncClient, engine: FakeEngine) -> None:
    error = error_of(await client.post(CHAT, json=chat_body(model="gpt-4o")), 404)
    assert error["code"] == "model_not_found"
    assert error["param"] == "model"
    assert "gpt-4o" in error["message"]
    body = {"model": "gpt-4o", "prompt": "x"}
    assert error_of(await client.post("/v1/completions", json=body), 404)["code"] == (
        "model_not_found"
    )
    missing = error_of(await client.get("/v1/models/gpt-4o"), 404)
    assert missing["code"] == "model_not_found"
    assert engine.calls == []


async def test_unknown_route(client: httpx.AsyncClient) -> None:
    error = error_of(await client.post("/v1/nothing-here", json={}), 404)
    assert error["type"] == "invalid_request_error"
    error_of(await client.get("/nothing"), 404)


async def test_wrong_method(client: httpx.AsyncClient) -> None:
    response = await client.get(CHAT)
    error = error_of(response, 405)
    assert error["type"] == "invalid_request_error"
    assert "POST" in response.headers.get("allow", "")


async def test_context_too_long() -> None:
    engine = FakeEngine(max_model_len=64)
    async with serve(engine) as client:
        long = chat_body(messages=[{"role": "user", "content": "x" * 100}])
        error = error_of(await client.post(CHAT, json=long), 400)
        assert error["code"] == "context_length_exceeded"
        assert "64" in error["message"]
        # The prompt fits but prompt + max_tokens does not.
        error = error_of(await client.post(CHAT, json=chat_body(max_tokens=60)), 400)
        assert error["code"] == "context_length_exceeded"
        body = {"model": MODEL, "prompt": "y" * 80, "max_tokens": 1}
        error = error_of(await client.post("/v1/completions", json=body), 400)
        assert error["code"] == "context_length_exceeded"
        assert engine.calls == []
        await assert_still_serves(client)


TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "see"}, IMAGE]}]},
            "messages[0].content",
        ),
        ({"modalities": ["text", "audio"]}, "modalities"),
    ],
)
async def test_unsupported_fields_are_refused_by_name(
    client: httpx.AsyncClient, engine: FakeEngine, fields: dict[str, Any], param: str
) -> None:
    error = error_of(await client.post(CHAT, json=chat_body(**fields)), 400)
    assert error["param"] == param
    assert error["code"] == "unsupported_parameter"
    assert engine.calls == []


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "g"}}},
            "tool_choice",
        ),
        ({"logprobs": False, "top_logprobs": 2}, "top_logprobs"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
            "response_format.json_schema.schema",
        ),
        ({"functions": [{"name": "f"}]}, "functions"),
    ],
)
async def test_inconsistent_fields_are_refused_by_name(
    client: httpx.AsyncClient, engine: FakeEngine, fields: dict[str, Any], param: str
) -> None:
    error = error_of(await client.post(CHAT, json=chat_body(**fields)), 400)
    assert error["param"] == param
    assert engine.calls == []


async def test_supported_neighbours_of_unsupported_fields_pass(client: httpx.AsyncClient) -> None:
    for fields in (
        {"tools": [], "tool_choice": "none"},
        {"logprobs": False},
        {"response_format": {"type": "text"}},
        {"modalities": ["text"]},
    ):
        response = await client.post(CHAT, json=chat_body(**fields))
        assert response.status_code == 200, (fields, response.text)


@pytest.mark.parametrize(
    ("fields", "param"),
    [({"suffix": "end"}, "suffix"), ({"best_of": 1, "n": 2}, "best_of")],
)
async def test_unsupported_completion_fields(
    client: httpx.AsyncClient, fields: dict[str, Any], param: str
) -> None:
    body = {"model": MODEL, "prompt": "x", **fields}
    error = error_of(await client.post("/v1/completions", json=body), 400)
    assert error["param"] == param


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
async def test_unexpected_exception_is_a_plain_500(
    monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    async def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret traceback detail")

    monkeypatch.setattr(ChatService, "start", explode)
    async with raw_serve(FakeEngine(), ready=True) as client:
        response = await client.post(CHAT, json=chat_body(stream=stream))
        error = error_of(response, 500)
        assert error["type"] == "server_error"
        assert "secret" not in response.text
        assert "Traceback" not in response.text
        assert "RuntimeError" not in response.text
        monkeypatch.undo()
        await assert_still_serves(client)


async def test_unexpected_exception_mid_stream_hides_its_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def explode(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async def chunks() -> AsyncIterator[Any]:
            raise RuntimeError("secret traceback detail")
            yield  # an async generator

        return chunks()

    monkeypatch.setattr(CompletionService, "stream", explode)
    async with raw_serve(FakeEngine(), ready=True) as client:
        body = {"model": MODEL, "prompt": "x", "stream": True}
        response = await client.post("/v1/completions", json=body)
    assert response.status_code == 200
    assert "secret" not in response.text
    assert "Traceback" not in response.text
    first, done = [e for e in response.text.split("\n\n") if e]
    assert json.loads(first.removeprefix("data: "))["error"]["type"] == "server_error"
    assert done == "data: [DONE]"


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
    ("path", "body"),
    [
        (CHAT, chat_body(max_tokens=0)),
        (CHAT, chat_body(max_completion_tokens=0, stream=True)),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 0}),
    ],
)
async def test_zero_max_tokens_is_not_a_server_error(
    client: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> None:
    # The spec allows 0 for completions; either an empty answer or a 400 naming the
    # parameter is a fair reply, a 500 is not.
    response = await client.post(path, json=body)
    if response.status_code == 200:
        if body.get("stream"):
            events = [e.removeprefix("data: ") for e in response.text.split("\n\n") if e]
            choices = [c for e in events[:-1] for c in json.loads(e)["choices"]]
        else:
            choices = response.json()["choices"]
        assert [c["finish_reason"] for c in choices if c["finish_reason"]] == ["length"]
    else:
        error = error_of(response, 400)
        assert error["param"] in ("max_tokens", "max_completion_tokens")
