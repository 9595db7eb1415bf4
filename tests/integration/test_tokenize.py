"""`/tokenize` and `/detokenize` with the real model's tokenizer and chat template."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, Server

pytestmark = pytest.mark.integration

CAPITAL_QUESTION = [
    {"role": "system", "content": "You are a geography teacher."},
    {"role": "user", "content": "What is the capital of France?"},
]


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.root, transport=ValidatingTransport(), timeout=60) as c:
        yield c


def post(http: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=body)
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


def tokenize(http: httpx.Client, **body: Any) -> dict[str, Any]:
    return post(http, "/tokenize", {"model": MODEL, **body})


def detokenize(http: httpx.Client, tokens: list[int]) -> str:
    prompt: str = post(http, "/detokenize", {"model": MODEL, "tokens": tokens})["prompt"]
    return prompt


def test_prompt_in_vllms_shape(http: httpx.Client) -> None:
    out = tokenize(http, prompt="Hello, world!", return_token_strs=True)
    assert set(out) == {"count", "max_model_len", "tokens", "token_strs"}
    assert out["count"] == len(out["tokens"]) > 1
    assert "".join(out["token_strs"]) == "Hello, world!"
    model = http.get("/v1/models").json()["data"][0]
    assert out["max_model_len"] == model["max_model_len"]


@pytest.mark.parametrize("text", ["Hello, world!", "Grüße aus Köln, 世界! 🙂", "  two  spaces\n"])
def test_round_trip(http: httpx.Client, text: str) -> None:
    assert detokenize(http, tokenize(http, prompt=text)["tokens"]) == text


def test_chat_count_is_the_chat_completions_prompt_tokens(http: httpx.Client) -> None:
    out = tokenize(http, messages=CAPITAL_QUESTION)
    reply = post(
        http,
        "/v1/chat/completions",
        {"model": MODEL, "messages": CAPITAL_QUESTION, "max_tokens": 1},
    )
    assert out["count"] == reply["usage"]["prompt_tokens"]


def test_chat_template_is_applied(http: httpx.Client) -> None:
    with_prompt = tokenize(http, messages=CAPITAL_QUESTION)["tokens"]
    without = tokenize(http, messages=CAPITAL_QUESTION, add_generation_prompt=False)["tokens"]
    assert with_prompt[: len(without)] == without
    assert len(with_prompt) > len(without)
    text = detokenize(http, with_prompt)
    assert "You are a geography teacher." in text
    assert text.rstrip().endswith("assistant")


def test_continue_final_message(http: httpx.Client) -> None:
    messages = [*CAPITAL_QUESTION, {"role": "assistant", "content": "The capital is"}]
    tokens = tokenize(http, messages=messages, continue_final_message=True)["tokens"]
    assert detokenize(http, tokens).endswith("The capital is")


def test_errors(http: httpx.Client) -> None:
    unknown = http.post("/tokenize", json={"model": "gpt-4o", "prompt": "Hi"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    neither = http.post("/tokenize", json={"model": MODEL})
    assert neither.status_code == 400
    assert neither.json()["error"]["param"] == "prompt"
    huge = http.post("/detokenize", json={"model": MODEL, "tokens": [2**40]})
    assert huge.status_code == 400
    assert huge.json()["error"]["param"] == "tokens"
