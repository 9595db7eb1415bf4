"""`/tokenize` and `/detokenize` with the fake engine (one token per UTF-8 byte)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import MODEL, chat_body, serve
from tests.unit.test_errors import error_of

HI = [{"role": "user", "content": "Hi"}]
# The fake engine's default template around HI.
HI_RENDERED = "<|user|>Hi\n<|assistant|>"


async def tokenize(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/tokenize", json=body)
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


# --- completion form ---------------------------------------------------------


async def test_prompt_gives_its_tokens_in_vllms_shape(client: httpx.AsyncClient) -> None:
    out = await tokenize(client, model=MODEL, prompt="Hi!")
    assert out == {"count": 3, "max_model_len": 2048, "tokens": [72, 105, 33], "token_strs": None}


async def test_model_may_be_left_out(client: httpx.AsyncClient) -> None:
    assert (await tokenize(client, prompt="Hi"))["tokens"] == [72, 105]


async def test_token_strs_on_request(client: httpx.AsyncClient) -> None:
    out = await tokenize(client, prompt="Hé", return_token_strs=True)
    # "é" is two bytes, so two tokens, neither a whole character alone.
    assert out["tokens"] == [72, 0xC3, 0xA9]
    assert out["token_strs"] == ["H", "\ufffd", "\ufffd"]


async def test_empty_prompt_has_no_tokens(client: httpx.AsyncClient) -> None:
    out = await tokenize(client, prompt="")
    assert out["count"] == 0
    assert out["tokens"] == []


# --- chat form ---------------------------------------------------------------


async def test_messages_are_rendered_with_the_chat_template(client: httpx.AsyncClient) -> None:
    out = await tokenize(client, model=MODEL, messages=HI, return_token_strs=True)
    assert out["tokens"] == list(HI_RENDERED.encode())
    assert "".join(out["token_strs"]) == HI_RENDERED


async def test_chat_count_is_the_chat_completions_prompt(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "!"}],
        },
    ]
    out = await tokenize(client, model=MODEL, messages=messages)
    reply = await client.post("/v1/chat/completions", json=chat_body(messages=messages))
    assert reply.status_code == 200, reply.text
    assert out["tokens"] == engine.calls[0].prompt_token_ids
    assert out["count"] == reply.json()["usage"]["prompt_tokens"]


async def test_without_generation_prompt(client: httpx.AsyncClient) -> None:
    out = await tokenize(client, messages=HI, add_generation_prompt=False)
    assert bytes(out["tokens"]).decode() == "<|user|>Hi\n"


async def test_continue_final_message(client: httpx.AsyncClient) -> None:
    messages = [*HI, {"role": "assistant", "content": "Hello"}]
    out = await tokenize(client, messages=messages, continue_final_message=True)
    assert bytes(out["tokens"]).decode().endswith("<|assistant|>Hello")


async def test_server_template_and_template_kwargs(tmp_path: Path) -> None:
    template = tmp_path / "template.jinja"
    template.write_text("{{ greeting }}{% for m in messages %}[{{ m.content }}]{% endfor %}")
    async with serve(FakeEngine(), chat_template=template) as client:
        out = await tokenize(client, messages=HI, chat_template_kwargs={"greeting": "Yo"})
    assert bytes(out["tokens"]).decode() == "Yo[Hi]"


async def test_tools_are_shown_to_the_template_as_in_chat_completions(tmp_path: Path) -> None:
    template = tmp_path / "template.jinja"
    template.write_text(
        "{% for t in tools or [] %}<tool {{ t.function.name }}>{% endfor %}"
        "{% for m in messages %}[{{ m.content }}]{% endfor %}"
    )
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    engine = FakeEngine()
    async with serve(engine, chat_template=template) as client:
        out = await tokenize(client, messages=HI, tools=tools)
        reply = await client.post("/v1/chat/completions", json=chat_body(tools=tools))
    assert reply.status_code == 200, reply.text
    assert bytes(out["tokens"]).decode() == "<tool get_weather>[Hi]"
    assert out["tokens"] == engine.calls[0].prompt_token_ids


# --- detokenize --------------------------------------------------------------


async def test_detokenize(client: httpx.AsyncClient) -> None:
    response = await client.post("/detokenize", json={"model": MODEL, "tokens": [72, 105]})
    assert response.status_code == 200, response.text
    assert response.json() == {"prompt": "Hi"}


async def test_round_trip(client: httpx.AsyncClient) -> None:
    text = "Grüße, 世界!"
    tokens = (await tokenize(client, prompt=text))["tokens"]
    response = await client.post("/detokenize", json={"tokens": tokens})
    assert response.json() == {"prompt": text}


async def test_detokenize_nothing(client: httpx.AsyncClient) -> None:
    response = await client.post("/detokenize", json={"tokens": []})
    assert response.json() == {"prompt": ""}


# --- errors ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/tokenize", "/detokenize"])
async def test_unknown_model(client: httpx.AsyncClient, path: str) -> None:
    body = {"model": "gpt-4o", "prompt": "Hi", "tokens": [72]}
    error = error_of(await client.post(path, json=body), 404)
    assert error["code"] == "model_not_found"
    assert error["param"] == "model"


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"model": MODEL}, "prompt", "missing_required_parameter"),
        ({"prompt": "Hi", "messages": HI}, "prompt", None),
        ({"prompt": 5}, "prompt", "invalid_type"),
        ({"prompt": "Hi", "add_special_tokens": "yes"}, "add_special_tokens", "invalid_type"),
        ({"messages": []}, "messages", "invalid_value"),
        ({"messages": [{"role": "wizard", "content": "Hi"}]}, "messages[0]", "invalid_value"),
        ({"messages": [{"role": "user", "content": 7}]}, "messages[0].content", "invalid_type"),
        ({"messages": [{"role": "user"}]}, "messages[0].content", "missing_required_parameter"),
        (
            {"messages": HI, "tools": [{"type": "function"}]},
            "tools[0].function",
            "missing_required_parameter",
        ),
        (
            {"messages": HI, "add_generation_prompt": True, "continue_final_message": True},
            "continue_final_message",
            None,
        ),
        ({"messages": HI, "continue_final_message": True}, "continue_final_message", None),
    ],
)
async def test_bad_tokenize_requests(
    client: httpx.AsyncClient, body: dict[str, Any], param: str, code: str | None
) -> None:
    error = error_of(await client.post("/tokenize", json=body), 400)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["code"] == code


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"chat_template": "{{ messages }}"}, "chat_template"),
        ({"add_special_tokens": True}, "add_special_tokens"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages[0].content",
        ),
    ],
)
async def test_unsupported_chat_options(
    client: httpx.AsyncClient, fields: dict[str, Any], param: str
) -> None:
    body = {"messages": HI, **fields}
    error = error_of(await client.post("/tokenize", json=body), 400)
    assert error["code"] == "unsupported_parameter"
    assert error["param"] == param


@pytest.mark.parametrize(
    ("tokens", "param"),
    [([72, 300], "tokens"), ([-1], "tokens[0]"), (["72"], "tokens[0]"), ([2**70], "tokens")],
)
async def test_bad_detokenize_requests(
    client: httpx.AsyncClient, tokens: list[Any], param: str
) -> None:
    error = error_of(await client.post("/detokenize", json={"tokens": tokens}), 400)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


async def test_missing_tokens(client: httpx.AsyncClient) -> None:
    error = error_of(await client.post("/detokenize", json={"model": MODEL}), 400)
    assert error["param"] == "tokens"
    assert error["code"] == "missing_required_parameter"


async def test_requests_are_counted_under_their_route(client: httpx.AsyncClient) -> None:
    await tokenize(client, prompt="Hi")
    await client.post("/detokenize", json={"tokens": [72]})
    metrics = (await client.get("/metrics")).text
    assert 'route="/tokenize",status="200"' in metrics
    assert 'route="/detokenize",status="200"' in metrics


async def test_detokenize_refuses_ids_outside_the_vocabulary(client: httpx.AsyncClient) -> None:
    reply = await client.post("/detokenize", json={"tokens": [72, 256]})
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "tokens"
    assert "256" in reply.json()["error"]["message"]
