"""The hostile corpus: each request gets its status and OpenAI's envelope, naming the field,
and the server keeps serving; what the same run found beyond errors is held here too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from oai_server.engine.fake.engine import CACHE_BLOCK_TOKENS, FakeEngine
from tests.unit.conftest import MODEL, chat_body, serve
from tests.unit.error_helpers import CHAT, assert_still_serves, error_of
from tests.unit.hostile_corpus import ALL_CASES, ARRAY_BOMB, HostileCase, chat, tool


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
async def test_hostile_request_is_refused_by_name(
    case: HostileCase, client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    response = await client.post(
        case.path, content=case.body, headers={"content-type": "application/json"}
    )
    error = error_of(response, case.status)
    assert error["type"] == "invalid_request_error"
    if case.param is not None:
        # The field, or an item of it (`stop_token_ids[0]`).
        assert error["param"] in (case.param, f"{case.param}[0]", f"{case.param}[0][0]"), error
    assert engine.calls == [], "refused before the engine saw it"
    await assert_still_serves(client)


async def test_a_normal_schema_still_passes(client: httpx.AsyncClient, engine: FakeEngine) -> None:
    recursive = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 100},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
            }
        },
        "$ref": "#/$defs/node",
    }
    bounded = {**ARRAY_BOMB, "minItems": 1, "maxItems": 10}
    # Data keywords are not read as schema keywords.
    data = {"enum": [{"minItems": 10**12}], "default": {"maxLength": 10**12}}
    for schema in (recursive, bounded, data):
        body = json.loads(
            chat(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": schema},
                }
            )
        )
        response = await client.post(CHAT, json=body)
        assert response.status_code == 200, response.text
    assert [c.options.structured for c in engine.calls if c.options.structured]


async def test_batch_and_token_limits_are_settings() -> None:
    async with serve(FakeEngine(), max_request_prompts=2, max_request_tokens=50) as client:
        three = {"model": MODEL, "prompt": ["a", "b", "c"], "max_tokens": 1}
        error = error_of(await client.post("/v1/completions", json=three), 400)
        assert error["param"] == "prompt"
        assert "at most 2" in error["message"]
        two = {**three, "prompt": ["a", "b"]}
        assert (await client.post("/v1/completions", json=two)).status_code == 200
        # 10 prompt tokens + 2 x 20 > 50.
        error = error_of(await client.post(CHAT, json=chat_body(n=2, max_tokens=20)), 400)
        assert (error["param"], error["code"]) == ("max_tokens", "request_too_large")
        assert (await client.post(CHAT, json=chat_body(max_tokens=20))).status_code == 200


async def test_model_root_is_no_filesystem_path(tmp_path: Path) -> None:
    async with serve(FakeEngine()) as client:
        listed = (await client.get("/v1/models")).json()["data"][0]
        assert listed["root"] == MODEL
    weights = tmp_path / "my-model"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    async with serve(FakeEngine(), model=str(weights), served_model_name="mine") as client:
        listed = (await client.get("/v1/models")).json()["data"][0]
        one = (await client.get("/v1/models/mine")).json()
        assert listed["root"] == one["root"] == "mine"
        assert str(tmp_path) not in (await client.get("/v1/models")).text
    async with serve(FakeEngine(), model="HuggingFaceTB/SmolLM2-135M-Instruct") as client:
        listed = (await client.get("/v1/models")).json()["data"][0]
        assert listed["root"] == "HuggingFaceTB/SmolLM2-135M-Instruct"


def _call_schema(engine: FakeEngine) -> dict[str, Any]:
    structured = engine.calls[-1].options.structured
    assert structured is not None
    assert structured.json_schema is not None
    return structured.json_schema


async def test_tool_arguments_are_the_declared_parameters(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    engine.reply = '{"input": 3}'
    magic = tool({"type": "object", "properties": {"input": {"type": "integer"}}}, "magic")
    named = {"type": "function", "function": {"name": "magic"}}
    assert (await client.post(CHAT, json=chat_body(tools=[magic], tool_choice=named))).is_success
    assert _call_schema(engine)["additionalProperties"] is False
    # A function without parameters takes an empty object.
    bare = {"type": "function", "function": {"name": "bare"}}
    engine.reply = "{}"
    choice = {"type": "function", "function": {"name": "bare"}}
    assert (await client.post(CHAT, json=chat_body(tools=[bare], tool_choice=choice))).is_success
    assert _call_schema(engine) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    # Under "required", each call's parameters are closed the same way.
    engine.reply = '[{"name": "bare", "parameters": {}}]'
    body = chat_body(tools=[magic, bare], tool_choice="required")
    assert (await client.post(CHAT, json=body)).is_success
    calls = _call_schema(engine)["items"]["anyOf"]
    assert [c["properties"]["parameters"]["additionalProperties"] for c in calls] == [False, False]
    # A schema that says it takes more keeps saying so.
    open_tool = tool({"type": "object", "additionalProperties": {"type": "string"}}, "open")
    choice = {"type": "function", "function": {"name": "open"}}
    engine.reply = "{}"
    assert (
        await client.post(CHAT, json=chat_body(tools=[open_tool], tool_choice=choice))
    ).is_success
    assert _call_schema(engine)["additionalProperties"] == {"type": "string"}


def _prompt(engine: FakeEngine) -> str:
    return bytes(engine.calls[-1].prompt_token_ids).decode()


async def test_tools_reach_a_model_whose_template_ignores_them(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    weather = tool({"type": "object", "properties": {"city": {"type": "string"}}}, "get_weather")
    assert (await client.post(CHAT, json=chat_body(tools=[weather]))).is_success
    prompt = _prompt(engine)
    assert "get_weather" in prompt
    assert '"city"' in prompt
    assert "<tool_call>" in prompt, "under auto the model is told the call format"
    # A named tool: decoding is constrained, so the format is not asked for.
    named = {"type": "function", "function": {"name": "get_weather"}}
    engine.reply = '{"city": "Paris"}'
    assert (await client.post(CHAT, json=chat_body(tools=[weather], tool_choice=named))).is_success
    assert "get_weather" in _prompt(engine)
    assert "<tool_call>" not in _prompt(engine)
    # An earlier call is shown as the model would have written it.
    history = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    engine.reply = "Sunny."
    assert (await client.post(CHAT, json=chat_body(messages=history, tools=[weather]))).is_success
    assert '{"name": "get_weather", "arguments": {"city": "Oslo"}}' in _prompt(engine)


async def test_a_template_that_renders_tools_is_left_alone(tmp_path: Path) -> None:
    template = tmp_path / "tools.jinja"
    template.write_text(
        "{% if tools %}TOOLS:{{ tools | map(attribute='function.name') | join(',') }}\n{% endif %}"
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}<|assistant|>"
    )
    engine = FakeEngine()
    async with serve(engine, chat_template=template) as client:
        weather = tool({"type": "object", "properties": {}}, "get_weather")
        assert (await client.post(CHAT, json=chat_body(tools=[weather]))).is_success
        prompt = _prompt(engine)
        assert prompt.startswith("TOOLS:get_weather\n")
        assert "<tools>" not in prompt


async def test_cached_tokens_are_reported() -> None:
    engine = FakeEngine(prefix_cache=True)
    async with serve(engine) as client:
        long = "A question that is long enough to fill a few blocks of the prefix cache. " * 3
        turn = [{"role": "user", "content": long}]
        first = (await client.post(CHAT, json=chat_body(messages=turn))).json()["usage"]
        assert first["prompt_tokens_details"]["cached_tokens"] == 0
        turn += [{"role": "assistant", "content": "Yes."}, {"role": "user", "content": "More?"}]
        body = chat_body(messages=turn, stream=True, stream_options={"include_usage": True})
        streamed = await client.post(CHAT, json=body)
        last = json.loads(streamed.text.split("data: ")[-2])
        cached = last["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached >= len(long) - CACHE_BLOCK_TOKENS
        assert cached % CACHE_BLOCK_TOKENS == 0
        assert cached < last["usage"]["prompt_tokens"]
        completion = {"model": MODEL, "prompt": [long, long], "max_tokens": 2}
        usage = (await client.post("/v1/completions", json=completion)).json()["usage"]
        # The second prompt of the batch reuses the first; a batch reports their sum.
        assert usage["prompt_tokens_details"]["cached_tokens"] >= len(long) - CACHE_BLOCK_TOKENS
