"""The whole answer is the sum of the streamed events: both paths agree, over HTTP."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from oai_server.services.chat_assembler import ChatAssembler
from oai_server.services.completion_assembler import CompletionAssembler
from schemas.chat import CreateChatCompletionStreamResponse
from schemas.completions import CreateCompletionResponse
from tests.unit.conftest import MODEL, chat_body

USAGE = {"stream_options": {"include_usage": True}}


def _events(text: str) -> list[dict[str, Any]]:
    events = [e.removeprefix("data: ") for e in text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("id", "created")}


@pytest.mark.parametrize(
    "body",
    [
        chat_body(),
        chat_body(n=3, temperature=0),
        chat_body(stop=["help"]),
        chat_body(max_tokens=3),
        chat_body(logprobs=True, top_logprobs=2),
    ],
)
async def test_chat_whole_equals_assembled_stream(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    whole = (await client.post("/v1/chat/completions", json=body)).json()
    streamed = await client.post("/v1/chat/completions", json={**body, **USAGE, "stream": True})
    assembler = ChatAssembler(with_logprobs=bool(body.get("logprobs")))
    for event in _events(streamed.text):
        assembler.add(CreateChatCompletionStreamResponse.model_validate(event))
    assembled = json.loads(assembler.result().to_json())
    assert _comparable(assembled) == _comparable(whole)


@pytest.mark.parametrize(
    "body",
    [
        {"prompt": "Say"},
        {"prompt": ["one", "two"], "n": 2, "temperature": 0},
        {"prompt": "Say", "echo": True, "logprobs": 1},
        {"prompt": "Say", "stop": "help"},
    ],
)
async def test_completion_whole_equals_assembled_stream(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    body = {"model": MODEL, "max_tokens": 20, **body}
    whole = (await client.post("/v1/completions", json=body)).json()
    streamed = await client.post("/v1/completions", json={**body, **USAGE, "stream": True})
    assembler = CompletionAssembler(with_logprobs=body.get("logprobs") is not None)
    for event in _events(streamed.text):
        assembler.add(CreateCompletionResponse.model_validate(event))
    assembled = json.loads(assembler.result("x", 0, MODEL).to_json())
    assert _comparable(assembled) == _comparable(whole)
    prompts = len(body["prompt"]) if isinstance(body["prompt"], list) else 1
    assert len(whole["choices"]) == prompts * body.get("n", 1)
