"""Every failure reaches the client in OpenAI's error envelope, with the right status."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import MODEL, chat_body, serve
from tests.unit.error_helpers import CHAT, assert_still_serves, error_of

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
    response = await client.put(CHAT)  # GET lists stored completions
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
            "messages[0].content[1]",
        ),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"audio": {"voice": "alloy", "format": "mp3"}}, "audio"),
        ({"function_call": "auto"}, "function_call"),
        ({"functions": [{"name": "f", "parameters": {}}]}, "functions"),
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
