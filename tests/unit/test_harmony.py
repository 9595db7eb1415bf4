"""gpt-oss served through harmony, as `vllm serve` serves it.

The fake engine stands in for gpt-oss with harmony's own encoding as its tokenizer
(`tests.unit.harmony_outputs`: why, and where the outputs come from) and streams the
token ids of gpt-oss's real outputs one by one. The server recognises the family, renders
the prompt with harmony and reads the answer with vLLM's harmony parser; every answer,
whole and streamed, chat and Responses, must equal what vLLM's `HarmonyParser` itself
makes of the same token ids (`parse`, and `parse_delta` fed token by token), and the
prompt what vLLM's own renderer makes of the same request.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from openai import AsyncOpenAI

from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import chat_body, serve
from tests.unit.harmony_outputs import (
    OUTPUTS,
    PLAIN,
    THOUGHT_THEN_ANSWER,
    TOOLS,
    TWO_CALLS,
    HarmonyTokenizer,
    pieces,
    token_ids,
)

CASES = [pytest.param(text, id=name) for name, text in OUTPUTS.items()]
MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is the weather in Tokyo?"},
]


def _engine(text: str) -> FakeEngine:
    return FakeEngine(tokens=pieces(text), model_tokenizer=HarmonyTokenizer())


def _body(**overrides: Any) -> dict[str, Any]:
    return chat_body(messages=MESSAGES, tools=TOOLS, **overrides)


def _vllm_parser(body: dict[str, Any]) -> tuple[Any, Any]:
    """vLLM's parser for a gpt-oss model, as `vllm serve` makes it (`is_harmony`)."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser import ParserManager

    cls = ParserManager.get_parser(
        tool_parser_name="openai",
        reasoning_parser_name="openai_gptoss",
        enable_auto_tools=True,
        is_harmony=True,
    )
    assert cls is not None
    request = ChatCompletionRequest.model_validate(body)
    return cls(HarmonyTokenizer(), request.tools), request


def vllm_whole(body: dict[str, Any], text: str) -> dict[str, Any]:
    """The message and reasoning tokens `vllm serve` answers `text` with, not streamed."""
    parser, request = _vllm_parser(body)
    ids = token_ids(text)
    reasoning, content, calls = parser.parse(
        "", request, enable_auto_tools=True, model_output_token_ids=ids
    )
    return {
        "reasoning": reasoning if request.include_reasoning else None,
        "content": content,
        "calls": [(c.name, c.arguments) for c in calls or []],
        "reasoning_tokens": parser.count_reasoning_tokens(ids),
    }


def vllm_stream(body: dict[str, Any], text: str) -> dict[str, Any]:
    """The sum of the deltas `vllm serve` streams `text` with, fed token by token."""
    parser, request = _vllm_parser(body)
    ids = token_ids(text)
    reasoning, content, names, arguments = "", "", {}, {}
    for i, token in enumerate(ids):
        delta = parser.parse_delta("", [token], request, [], finished=i == len(ids) - 1)
        if delta is None:
            continue
        reasoning += delta.reasoning or ""
        content += delta.content or ""
        for call in delta.tool_calls:
            if call.function.name:
                names[call.index] = call.function.name
            arguments[call.index] = arguments.get(call.index, "") + call.function.arguments
    return {
        "reasoning": reasoning or None,
        "content": content or None,
        "calls": [(names[i], arguments[i]) for i in sorted(names)],
        "reasoning_tokens": parser.count_reasoning_tokens(ids),
    }


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
    reasoning, content, names, arguments, finish, usage = "", "", {}, {}, None, None
    for line in text.split("\n\n"):
        if not line.startswith("data: {"):
            continue
        event = json.loads(line.removeprefix("data: "))
        usage = event.get("usage") or usage
        for choice in event["choices"]:
            delta = choice["delta"]
            reasoning += delta.get("reasoning") or ""
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                if "id" in call:  # OpenAI's shape: the id, type and name come first
                    assert call["type"] == "function"
                    assert call["function"]["name"]
                    assert call["index"] not in names
                    names[call["index"]] = call["function"]["name"]
                assert call["index"] in names
                arguments[call["index"]] = (
                    arguments.get(call["index"], "") + call["function"]["arguments"]
                )
            finish = choice["finish_reason"] or finish
    assert usage is not None
    summed = {
        "reasoning": reasoning or None,
        "content": content or None,
        "calls": [(names[i], arguments[i]) for i in sorted(names)],
        "reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"],
    }
    return summed, finish


@pytest.mark.parametrize("text", CASES)
async def test_whole_answer_is_vllms(text: str) -> None:
    async with serve(_engine(text)) as client:
        reply = await client.post("/v1/chat/completions", json=_body())
    assert reply.status_code == 200, reply.text
    answer = _whole(reply.json())
    assert answer == vllm_whole(_body(), text)
    assert "<|" not in json.dumps(answer)  # no harmony markup reaches the client
    finish = reply.json()["choices"][0]["finish_reason"]
    assert finish == ("tool_calls" if answer["calls"] else "stop")


@pytest.mark.parametrize("text", CASES)
async def test_streamed_deltas_add_up_to_vllms(text: str) -> None:
    body = _body(stream=True, stream_options={"include_usage": True})
    async with serve(_engine(text)) as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    summed, finish = _streamed(reply.text)
    assert summed == vllm_stream(body, text)
    assert finish == ("tool_calls" if summed["calls"] else "stop")


async def test_the_parts_land_where_openai_puts_them() -> None:
    """What a user sees, without the reference: thinking apart, answer, calls."""
    async with serve(_engine(THOUGHT_THEN_ANSWER)) as client:
        answer = (await client.post("/v1/chat/completions", json=_body())).json()
    async with serve(_engine(TWO_CALLS)) as client:
        calls = (await client.post("/v1/chat/completions", json=_body())).json()
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
    body = _body(include_reasoning=False)
    async with serve(_engine(THOUGHT_THEN_ANSWER)) as client:
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
    body = _body(parallel_tool_calls=False)
    async with serve(_engine(TWO_CALLS)) as client:
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


def _vllm_prompt(body: dict[str, Any]) -> list[int]:
    """The prompt `vllm serve`'s renderer makes of `body` for a gpt-oss model."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.renderers.online_renderer import OnlineRenderer

    request = ChatCompletionRequest.model_validate(body)
    renderer = SimpleNamespace(supports_browsing=False, supports_code_interpreter=False)
    renderer.renderer = None
    _, inputs = OnlineRenderer._make_request_with_harmony(renderer, request)  # type: ignore[arg-type]
    return list(inputs[0]["prompt_token_ids"])


# An earlier turn that thought, called a tool and had its output, then answered; and a
# new question: harmony drops the thinking that came before the last final answer.
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
        pytest.param(_body(reasoning_effort="high"), id="tools and effort"),
        pytest.param(chat_body(messages=MESSAGES), id="no tools"),
        pytest.param(chat_body(messages=HISTORY, tools=TOOLS), id="earlier turns"),
    ],
)
async def test_the_prompt_is_vllms_harmony_rendering(body: dict[str, Any]) -> None:
    engine = _engine(THOUGHT_THEN_ANSWER)
    async with serve(engine) as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    prompt = engine.calls[0].prompt_token_ids
    assert prompt == _vllm_prompt(body)
    text = HarmonyTokenizer().decode(prompt)
    assert text.startswith("<|start|>system<|message|>")
    assert text.endswith("<|start|>assistant")
    assert ("Reasoning: high" in text) == (body.get("reasoning_effort") == "high")
    assert ("type get_current_weather" in text) == ("tools" in body)


async def test_earlier_turns_reach_the_model_in_harmony() -> None:
    engine = _engine(THOUGHT_THEN_ANSWER)
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
    ],
)
async def test_what_harmony_cannot_serve_is_refused(overrides: dict[str, Any], param: str) -> None:
    engine = _engine(THOUGHT_THEN_ANSWER)
    async with serve(engine) as client:
        reply = await client.post("/v1/chat/completions", json=_body(**overrides))
        after = await client.post("/v1/chat/completions", json=_body())
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param
    assert after.status_code == 200
    assert len(engine.calls) == 1


async def test_the_openai_sdk_reads_chat_answers() -> None:
    async with serve(_engine(TWO_CALLS)) as http:
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
    async with serve(_engine(text)) as http:
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
    engine = _engine(PLAIN)
    body = _body(reasoning_effort="low")
    async with serve(engine) as client:
        await client.post("/v1/chat/completions", json=body)
        counted = await client.post(
            "/tokenize", json={"model": body["model"], "messages": MESSAGES, "tools": TOOLS}
        )
    assert counted.status_code == 200, counted.text
    assert counted.json()["tokens"] == _vllm_prompt(_body())


async def test_ready_line_says_harmony(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="oai_server.app"):
        async with serve(_engine(PLAIN), reasoning_parser="none"):
            pass
    line = "harmony: reasoning none, tool calls openai (gpt-oss)"
    assert f"smollm2-135m-instruct: {line}" in caplog.text


async def test_reasoning_parser_none_leaves_the_thinking_out_uncounted() -> None:
    """As `vllm serve --tool-call-parser openai` without `--reasoning-parser`."""
    async with serve(_engine(THOUGHT_THEN_ANSWER), reasoning_parser="none") as client:
        reply = (await client.post("/v1/chat/completions", json=_body())).json()
    message = reply["choices"][0]["message"]
    assert message["content"] == "2 + 2 = 4."
    assert message.get("reasoning") is None
    assert (reply["usage"].get("completion_tokens_details") or {}).get("reasoning_tokens") in (
        None,
        0,
    )
