"""gpt-oss served through harmony, as `vllm serve` serves it.

The fake engine stands in for gpt-oss with harmony's own encoding as its tokenizer
(`tests.unit.harmony_outputs`: why, and where the outputs come from) and streams the
token ids of gpt-oss's real outputs one by one. The server recognises the family, renders
the prompt with harmony and reads the answer with vLLM's harmony parser; every answer,
whole and streamed, must equal what vLLM's `HarmonyParser` itself makes of the same token
ids (`parse`, and `parse_delta` fed token by token: `tests.unit.harmony_reference`), and
the prompt what vLLM's own renderer makes of the same request. The OpenAI SDK and the
Responses API read the same answers in `tests.unit.test_harmony_clients`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from tests.unit.conftest import chat_body, serve
from tests.unit.harmony_outputs import (
    OUTPUTS,
    PLAIN,
    THOUGHT_THEN_ANSWER,
    TOOLS,
    TWO_CALLS,
    HarmonyTokenizer,
)
from tests.unit.harmony_reference import (
    MESSAGES,
    ask,
    engine_for,
    vllm_prompt,
    vllm_stream,
    vllm_whole,
)
from tests.unit.streamed_chat import sum_of_stream

CASES = [pytest.param(text, id=name) for name, text in OUTPUTS.items()]


def _whole(reply: dict[str, Any]) -> dict[str, Any]:
    message = reply["choices"][0]["message"]
    return {
        "reasoning": message.get("reasoning"),
        "content": message["content"],
        "calls": [
            (c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or []
        ],
        "reasoning_tokens": reply["usage"]["completion_tokens_details"]["reasoning_tokens"],
    }


def _streamed(text: str) -> tuple[dict[str, Any], str | None]:
    summed = sum_of_stream(text)
    assert summed.usage is not None
    answer = {
        "reasoning": summed.reasoning or None,
        "content": summed.content or None,
        "calls": summed.calls,
        "reasoning_tokens": summed.usage["completion_tokens_details"]["reasoning_tokens"],
    }
    return answer, summed.finish


@pytest.mark.parametrize("text", CASES)
async def test_whole_answer_is_vllms(text: str) -> None:
    async with serve(engine_for(text)) as client:
        reply = await client.post("/v1/chat/completions", json=ask())
    assert reply.status_code == 200, reply.text
    answer = _whole(reply.json())
    assert answer == vllm_whole(ask(), text)
    assert "<|" not in json.dumps(answer)  # no harmony markup reaches the client
    finish = reply.json()["choices"][0]["finish_reason"]
    assert finish == ("tool_calls" if answer["calls"] else "stop")


@pytest.mark.parametrize("text", CASES)
async def test_streamed_deltas_add_up_to_vllms(text: str) -> None:
    body = ask(stream=True, stream_options={"include_usage": True})
    async with serve(engine_for(text)) as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    summed, finish = _streamed(reply.text)
    assert summed == vllm_stream(body, text)
    assert finish == ("tool_calls" if summed["calls"] else "stop")


async def test_the_parts_land_where_openai_puts_them() -> None:
    """What a user sees, without the reference: thinking apart, answer, calls."""
    async with serve(engine_for(THOUGHT_THEN_ANSWER)) as client:
        answer = (await client.post("/v1/chat/completions", json=ask())).json()
    async with serve(engine_for(TWO_CALLS)) as client:
        calls = (await client.post("/v1/chat/completions", json=ask())).json()
    message = answer["choices"][0]["message"]
    assert message["content"] == "2 + 2 = 4."
    assert message["reasoning"].startswith('User asks: "What is 2 + 2?"')
    assert answer["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    made = calls["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in made] == [
        ("get_current_weather", {"location": "Tokyo"}),
        ("get_user_location", {"location": "Tokyo"}),
    ]


async def test_include_reasoning_false_leaves_the_thinking_out_but_counts_it() -> None:
    body = ask(include_reasoning=False)
    async with serve(engine_for(THOUGHT_THEN_ANSWER)) as client:
        whole = await client.post("/v1/chat/completions", json=body)
        streamed = await client.post(
            "/v1/chat/completions",
            json={**body, "stream": True, "stream_options": {"include_usage": True}},
        )
    assert _whole(whole.json()) == vllm_whole(body, THOUGHT_THEN_ANSWER)
    assert whole.json()["choices"][0]["message"].get("reasoning") is None
    summed, _ = _streamed(streamed.text)
    assert summed["reasoning"] is None
    assert summed["content"] == "2 + 2 = 4."
    assert summed["reasoning_tokens"] > 0


async def test_parallel_tool_calls_false_keeps_the_first() -> None:
    body = ask(parallel_tool_calls=False)
    async with serve(engine_for(TWO_CALLS)) as client:
        whole = await client.post("/v1/chat/completions", json=body)
        streamed = await client.post("/v1/chat/completions", json={**body, "stream": True})
    calls = whole.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_current_weather"]
    names = [
        call["function"]["name"]
        for line in streamed.text.split("\n\n")
        if line.startswith("data: {")
        for choice in json.loads(line.removeprefix("data: "))["choices"]
        for call in choice["delta"].get("tool_calls") or []
        if "id" in call
    ]
    assert names == ["get_current_weather"]


HISTORY = [
    *MESSAGES,
    {
        "role": "assistant",
        "content": None,
        "reasoning": "Need the weather tool.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_current_weather", "arguments": '{"location":"Tokyo"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"sunny": true}'},
    {"role": "assistant", "content": "It is sunny in Tokyo.", "reasoning": "Sunny, say so."},
    {"role": "user", "content": "And tomorrow?"},
]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(ask(reasoning_effort="high"), id="tools and effort"),
        pytest.param(chat_body(messages=MESSAGES), id="no tools"),
        pytest.param(chat_body(messages=HISTORY, tools=TOOLS), id="earlier turns"),
    ],
)
async def test_the_prompt_is_vllms_harmony_rendering(body: dict[str, Any]) -> None:
    engine = engine_for(THOUGHT_THEN_ANSWER)
    async with serve(engine) as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    prompt = engine.calls[0].prompt_token_ids
    assert prompt == vllm_prompt(body)
    text = HarmonyTokenizer().decode(prompt)
    assert text.startswith("<|start|>system<|message|>")
    assert text.endswith("<|start|>assistant")
    assert ("Reasoning: high" in text) == (body.get("reasoning_effort") == "high")
    assert ("type get_current_weather" in text) == ("tools" in body)


async def test_earlier_turns_reach_the_model_in_harmony() -> None:
    engine = engine_for(THOUGHT_THEN_ANSWER)
    async with serve(engine) as client:
        await client.post("/v1/chat/completions", json=chat_body(messages=HISTORY, tools=TOOLS))
    text = HarmonyTokenizer().decode(engine.calls[0].prompt_token_ids)
    call = "<|start|>assistant to=functions.get_current_weather<|channel|>commentary json"
    output = "<|start|>functions.get_current_weather<|channel|>commentary to=assistant"
    assert f'{call}<|message|>{{"location":"Tokyo"}}<|call|>' in text
    assert f'{output}<|message|>{{"sunny": true}}<|end|>' in text
    assert "<|channel|>final<|message|>It is sunny in Tokyo.<|end|>" in text
    # Thinking before the last final answer is dropped, as harmony wants.
    assert "Need the weather tool." not in text
    assert "Sunny, say so." not in text


@pytest.mark.parametrize(
    ("overrides", "param"),
    [
        ({"reasoning_effort": "none"}, "reasoning_effort"),
        ({"reasoning_effort": "minimal"}, "reasoning_effort"),
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "get_user_location"}}},
            "tool_choice",
        ),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        (
            {
                "tool_choice": {
                    "type": "allowed_tools",
                    "allowed_tools": {
                        "mode": "required",
                        "tools": [
                            {"type": "function", "function": {"name": "get_current_weather"}}
                        ],
                    },
                }
            },
            "tool_choice",
        ),
        ({"tools": [*TOOLS, {"type": "custom", "custom": {"name": "patch"}}]}, "tools[2]"),
    ],
)
async def test_what_harmony_cannot_serve_is_refused(overrides: dict[str, Any], param: str) -> None:
    engine = engine_for(THOUGHT_THEN_ANSWER)
    async with serve(engine) as client:
        reply = await client.post("/v1/chat/completions", json=ask(**overrides))
        after = await client.post("/v1/chat/completions", json=ask())
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param
    assert after.status_code == 200
    assert len(engine.calls) == 1


async def test_ready_line_says_harmony(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="oai_server.app"):
        async with serve(engine_for(PLAIN), reasoning_parser="none"):
            pass
    line = "harmony: reasoning none, tool calls openai (gpt-oss)"
    assert f"smollm2-135m-instruct: {line}" in caplog.text


async def test_reasoning_parser_none_leaves_the_thinking_out_uncounted() -> None:
    """As `vllm serve --tool-call-parser openai` without `--reasoning-parser`."""
    async with serve(engine_for(THOUGHT_THEN_ANSWER), reasoning_parser="none") as client:
        reply = (await client.post("/v1/chat/completions", json=ask())).json()
    message = reply["choices"][0]["message"]
    assert message["content"] == "2 + 2 = 4."
    assert message.get("reasoning") is None
    assert (reply["usage"].get("completion_tokens_details") or {}).get("reasoning_tokens") in (
        None,
        0,
    )
