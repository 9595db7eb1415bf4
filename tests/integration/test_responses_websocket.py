"""Responses WebSocket mode on the real engine, through the official SDK's socket client.

An agent's chain of five `store: false` turns, a tool call among them, runs on one socket
(`client.responses.connect`); the same chain over HTTP, the whole history sent again
each turn, gets the same answers (greedy, bounded). A socket closed mid-answer frees its
engine request.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import openai
import pytest
import websockets

from tests.integration.conftest import MODEL, Server

pytestmark = pytest.mark.integration

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
BOUNDED: dict[str, Any] = {"temperature": 0, "max_output_tokens": 16, "tools": [WEATHER]}
TIMEOUT_S = 60.0


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def turns_after(output: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    """The new input of turn `index` (from 1) once the previous turn answered `output`:
    the tool's result for a call, a user message otherwise."""
    calls = [item for item in output if item["type"] == "function_call"]
    if calls:
        return [
            {"type": "function_call_output", "call_id": c["call_id"], "output": "Sunny, 21 C."}
            for c in calls
        ]
    return [user(f"Thanks. Question {index}: name one city in France.")]


FIRST = [user("What is the weather in Paris? Use the tool.")]


async def socket_chain(server: Server) -> list[list[dict[str, Any]]]:
    """Five turns on one socket, each continuing the last by `previous_response_id`."""
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    outputs: list[list[dict[str, Any]]] = []
    async with client.responses.connect() as conn:
        previous: str | None = None
        new_input = FIRST
        for index in range(5):
            extra = {} if index else {"tool_choice": "required"}
            await conn.send(
                {
                    "type": "response.create",
                    "model": MODEL,
                    "store": False,
                    "input": new_input,
                    "previous_response_id": previous,
                    **BOUNDED,
                    **extra,
                }
            )
            response = await until_done(conn)
            outputs.append(response["output"])
            previous = response["id"]
            new_input = turns_after(response["output"], index + 1)
    return outputs


async def until_done(conn: Any) -> dict[str, Any]:
    async with asyncio.timeout(TIMEOUT_S):
        async for event in conn:
            assert event.type != "error", event
            if event.type in ("response.completed", "response.incomplete"):
                done: dict[str, Any] = event.response.model_dump(mode="json")
                return done
    raise AssertionError("the socket closed before the response ended")


def http_chain(server: Server) -> list[list[dict[str, Any]]]:
    """The same five turns over HTTP, `store: false`: the whole history sent each time."""
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    outputs: list[list[dict[str, Any]]] = []
    history: list[dict[str, Any]] = list(FIRST)
    for index in range(5):
        extra = {} if index else {"tool_choice": "required"}
        response = client.responses.create(
            model=MODEL, store=False, input=history, **BOUNDED, **extra
        )
        output = [item.model_dump(mode="json", exclude_none=True) for item in response.output]
        outputs.append(output)
        history += [*output, *turns_after(output, index + 1)]
    return outputs


def answers(outputs: list[list[dict[str, Any]]]) -> list[list[str]]:
    """What each turn said: its text, or the calls it made (ids differ between runs)."""
    said: list[list[str]] = []
    for output in outputs:
        turn = []
        for item in output:
            if item["type"] == "function_call":
                turn.append(f"call {item['name']}({item['arguments']})")
            elif item["type"] == "message":
                turn.append("".join(part.get("text", "") for part in item["content"]))
        said.append(turn)
    return said


async def test_a_five_turn_tool_chain_answers_as_over_http(server: Server) -> None:
    over_socket = answers(await socket_chain(server))
    over_http = answers(await asyncio.to_thread(http_chain, server))
    assert over_socket[0][0].startswith("call get_weather(")  # the tool was called
    assert all(turn for turn in over_socket)
    assert over_socket == over_http


async def test_a_socket_closed_mid_answer_frees_the_engine(server: Server) -> None:
    url = server.root.replace("http", "ws", 1) + "/v1/responses"
    body = {
        "type": "response.create",
        "model": MODEL,
        "store": False,
        "input": "Write a very long story about the sea.",
        "max_output_tokens": 1500,
    }
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps(body))
        while json.loads(await ws.recv())["type"] != "response.output_text.delta":
            pass
        assert await asyncio.to_thread(server.running_requests) == 1
    deadline = time.monotonic() + TIMEOUT_S
    while await asyncio.to_thread(server.running_requests) and time.monotonic() < deadline:  # noqa: ASYNC110 - over HTTP
        await asyncio.sleep(0.1)
    assert await asyncio.to_thread(server.running_requests) == 0
