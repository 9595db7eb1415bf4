"""gpt-oss's harmony answers read by the OpenAI SDK, chat and Responses, and its prompt
counted by `/tokenize` (fake engine; see `tests.unit.test_harmony`)."""

from __future__ import annotations

from typing import Any

import pytest
from openai import AsyncOpenAI

from tests.unit.conftest import serve
from tests.unit.harmony_outputs import OUTPUTS, PLAIN, TOOLS, TWO_CALLS
from tests.unit.harmony_reference import (
    MESSAGES,
    ask,
    engine_for,
    vllm_prompt,
    vllm_stream,
    vllm_whole,
)

CASES = [pytest.param(text, id=name) for name, text in OUTPUTS.items()]


async def test_the_openai_sdk_reads_chat_answers() -> None:
    async with serve(engine_for(TWO_CALLS)) as http:
        sdk = AsyncOpenAI(base_url="http://test/v1", api_key="none", http_client=http)
        whole = await sdk.chat.completions.create(
            model="smollm2-135m-instruct",
            messages=MESSAGES,
            tools=TOOLS,  # type: ignore[arg-type]
        )
        stream = await sdk.chat.completions.create(
            model="smollm2-135m-instruct",
            messages=MESSAGES,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            stream=True,
        )
        names = [
            call.function.name
            async for chunk in stream
            for choice in chunk.choices
            for call in choice.delta.tool_calls or []
            if call.function is not None and call.function.name
        ]
    calls = whole.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_current_weather", "get_user_location"]  # type: ignore[union-attr]
    assert whole.choices[0].finish_reason == "tool_calls"
    assert names == ["get_current_weather", "get_user_location"]


RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]


def _items(output: list[Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for item in output:
        if item.type == "reasoning":
            out.append(("reasoning", "".join(c.text for c in item.content or [])))
        elif item.type == "message":
            out.append(("message", "".join(c.text for c in item.content)))
        else:
            out.append(("function_call", (item.name, item.arguments)))
    return out


def _expected_items(answer: dict[str, Any]) -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    if answer["reasoning"]:
        items.append(("reasoning", answer["reasoning"]))
    if answer["content"]:
        items.append(("message", answer["content"]))
    items += [("function_call", call) for call in answer["calls"]]
    return items


@pytest.mark.parametrize("text", CASES)
async def test_responses_items_are_vllms_parse(text: str) -> None:
    body = {
        "model": "smollm2-135m-instruct",
        "input": MESSAGES[1]["content"],
        "tools": RESPONSES_TOOLS,
    }
    async with serve(engine_for(text)) as http:
        sdk = AsyncOpenAI(base_url="http://test/v1", api_key="none", http_client=http)
        whole = await sdk.responses.create(**body)
        stream = await sdk.responses.create(**body, stream=True)
        done = [event async for event in stream if event.type == "response.completed"]
    chat_tools = {"messages": [MESSAGES[1]], "tools": TOOLS, "model": "m"}
    # A call's arguments as the model wrote them, streamed or not, as vLLM's own Responses
    # API gives them (`responses/harmony.py`: `arguments=content.text`).
    expected = _expected_items(vllm_stream(chat_tools, text))
    assert _items(whole.output) == expected
    assert _items(done[0].response.output) == expected
    assert whole.usage is not None
    assert (
        whole.usage.output_tokens_details.reasoning_tokens
        == vllm_whole(chat_tools, text)["reasoning_tokens"]
    )


async def test_tokenize_counts_the_harmony_prompt() -> None:
    engine = engine_for(PLAIN)
    body = ask(reasoning_effort="low")
    async with serve(engine) as client:
        await client.post("/v1/chat/completions", json=body)
        counted = await client.post(
            "/tokenize", json={"model": body["model"], "messages": MESSAGES, "tools": TOOLS}
        )
    assert counted.status_code == 200, counted.text
    assert counted.json()["tokens"] == vllm_prompt(ask())
