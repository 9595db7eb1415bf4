"""Reasoning: vLLM's reasoning parsers behind `--reasoning-parser`, end to end.

The raw outputs are those of vLLM's own reasoning-parser tests (vllm-project/vllm,
`tests/reasoning/test_deepseekr1_reasoning_parser.py`: SIMPLE_REASONING, MULTIPLE_LINES,
REASONING_WITH_THINK, COMPLETE_REASONING) and, for a call after the thinking, the Hermes
call form of `tests/tool_parsers/test_hermes_tool_parser.py`. The fake engine streams
each one piece by piece, with token ids from a tokenizer that has the family's `<think>`
and `</think>` tokens; the answers are compared with what vLLM's parser itself makes of
the whole text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from oai_server.engine.fake import FakeEngine
from oai_server.engine.vllm.reasoning import reasoning_parser_class
from oai_server.settings import Settings
from tests.unit.conftest import chat_body, serve

THINK = ("<think>", "</think>")

R1_OUTPUTS = [
    "This is a reasoning section</think>This is the rest",
    "This\nThat</think>This is the rest\nThat",
    "<think>This is a reasoning section</think>This is the rest",
    "This is a reasoning section</think>",
    "This is a reasoning section",  # never ends: all of it is thinking
]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def pieces(text: str) -> list[str]:
    """The text as a model streams it: the tags alone, the rest a few characters a step."""
    out: list[str] = []
    for part in (
        text.replace("<think>", "\0<think>\0").replace("</think>", "\0</think>\0").split("\0")
    ):
        if part in THINK:
            out.append(part)
        else:
            out += [part[i : i + 3] for i in range(0, len(part), 3)]
    return out


def engine_for(text: str) -> FakeEngine:
    return FakeEngine(tokens=pieces(text), added_tokens=THINK)


def vllm_split(text: str, name: str = "deepseek_r1") -> tuple[str | None, str | None]:
    """What vLLM's parser makes of the whole text."""
    tokenizer = FakeEngine(added_tokens=THINK).tokenizer
    return reasoning_parser_class(name)(tokenizer).extract_reasoning(text, None)  # type: ignore[no-any-return]


def stream_chunks(body: str) -> list[dict[str, Any]]:
    lines = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


@pytest.mark.parametrize("text", R1_OUTPUTS)
async def test_whole_and_streamed_answers_are_vllms_split(text: str) -> None:
    reasoning, content = vllm_split(text)
    engine = engine_for(text)
    async with serve(engine, reasoning_parser="deepseek_r1") as client:
        whole = (await client.post("/v1/chat/completions", json=chat_body())).json()
        streamed = await client.post(
            "/v1/chat/completions",
            json=chat_body(stream=True, stream_options={"include_usage": True}),
        )
    message = whole["choices"][0]["message"]
    assert (message.get("reasoning"), message["content"]) == (reasoning, content)
    chunks = stream_chunks(streamed.text)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    summed_reasoning = "".join(d.get("reasoning") or "" for d in deltas)
    summed_content = "".join(d.get("content") or "" for d in deltas)
    assert summed_reasoning == (reasoning or "")
    assert summed_content == (content or "")
    # No delta mixes the tags into the text a user sees.
    shown = [(d.get("content") or "") + (d.get("reasoning") or "") for d in deltas]
    assert not any("think>" in text for text in shown)
    usage = chunks[-1]["usage"]
    assert usage == whole["usage"]
    thinking_steps = sum(1 for d in deltas if d.get("reasoning") and not d.get("content"))
    assert usage["completion_tokens_details"]["reasoning_tokens"] == thinking_steps > 0


async def test_reasoning_then_a_hermes_call() -> None:
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Dallas"}}\n</tool_call>'
    text = "The user wants the weather in Dallas; I will call the tool.</think>\n\n" + call
    async with serve(engine_for(text), reasoning_parser="deepseek_r1") as client:
        whole = (await client.post("/v1/chat/completions", json=chat_body(tools=[WEATHER]))).json()
        streamed = await client.post(
            "/v1/chat/completions", json=chat_body(tools=[WEATHER], stream=True)
        )
    choice = whole["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["reasoning"] == vllm_split(text)[0]
    (made,) = choice["message"]["tool_calls"]
    assert made["function"]["name"] == "get_weather"
    assert json.loads(made["function"]["arguments"]) == {"city": "Dallas"}
    deltas = [c["choices"][0]["delta"] for c in stream_chunks(streamed.text) if c["choices"]]
    # The tool parser saw only the content: the thinking went out before any call.
    first_call = next(i for i, d in enumerate(deltas) if d.get("tool_calls"))
    assert all(not d.get("reasoning") for d in deltas[first_call:])
    assert "".join(d.get("reasoning") or "" for d in deltas) == vllm_split(text)[0]


async def test_include_reasoning_false_leaves_the_thinking_out() -> None:
    text = R1_OUTPUTS[0]
    async with serve(engine_for(text), reasoning_parser="deepseek_r1") as client:
        whole = (
            await client.post("/v1/chat/completions", json=chat_body(include_reasoning=False))
        ).json()
        shown = (await client.post("/v1/chat/completions", json=chat_body())).json()
    message = whole["choices"][0]["message"]
    assert "reasoning" not in message
    assert message["content"] == "This is the rest"
    counted = shown["usage"]["completion_tokens_details"]["reasoning_tokens"]
    assert whole["usage"]["completion_tokens_details"]["reasoning_tokens"] == counted > 0


async def test_without_a_parser_the_thinking_is_content() -> None:
    text = R1_OUTPUTS[0]
    async with serve(engine_for(text)) as client:
        whole = (await client.post("/v1/chat/completions", json=chat_body())).json()
    assert whole["choices"][0]["message"]["content"] == text
    assert "completion_tokens_details" not in whole["usage"]


async def test_reasoning_effort_and_template_kwargs_reach_the_template() -> None:
    template = (
        "{% for m in messages %}{{ m.content }}{% endfor %}"
        "[effort={{ reasoning_effort }} thinking={{ enable_thinking }}]"
    )
    engine = FakeEngine(chat_template=template)
    async with serve(engine) as client:
        await client.post("/v1/chat/completions", json=chat_body(reasoning_effort="low"))
        await client.post(
            "/v1/chat/completions",
            json=chat_body(reasoning_effort="none", chat_template_kwargs={"enable_thinking": True}),
        )
    prompts = [engine.tokenizer.decode(c.prompt_token_ids) for c in engine.calls]
    assert prompts[0].endswith("[effort=low thinking=True]")
    assert prompts[1].endswith("[effort=none thinking=True]")


def test_an_unknown_parser_stops_the_start_listing_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="deepseek_r1, deepseek_v3") as raised:
        Settings(reasoning_parser="deepseek-r2")
    assert "qwen3" in str(raised.value)


async def test_the_response_cache_replays_the_thinking_and_its_count() -> None:
    engine = engine_for(R1_OUTPUTS[0])
    body = chat_body(temperature=0)
    async with serve(engine, reasoning_parser="deepseek_r1", response_cache="memory") as client:
        first = (await client.post("/v1/chat/completions", json=body)).json()
        again = (await client.post("/v1/chat/completions", json=body)).json()
        streamed = await client.post(
            "/v1/chat/completions",
            json={**body, "stream": True, "stream_options": {"include_usage": True}},
        )
    assert len(engine.calls) == 1  # both later answers are the cache's
    assert again["choices"][0]["message"] == first["choices"][0]["message"]
    assert first["choices"][0]["message"]["reasoning"] == "This is a reasoning section"
    details = first["usage"]["completion_tokens_details"]
    assert again["usage"]["completion_tokens_details"] == details
    chunks = stream_chunks(streamed.text)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("reasoning") or "" for d in deltas) == "This is a reasoning section"
    assert chunks[-1]["usage"]["completion_tokens_details"] == details


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
async def test_an_earlier_turns_reasoning_reaches_the_template(field: str) -> None:
    template = (
        "{% for m in messages %}<|{{ m.role }}|>"
        "{% if m.reasoning %}[thought:{{ m.reasoning_content }}]{% endif %}{{ m.content }}"
        "{% endfor %}"
    )
    engine = FakeEngine(chat_template=template)
    turns = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!", field: "They greet me."},
        {"role": "user", "content": "How are you?"},
    ]
    async with serve(engine) as client:
        await client.post("/v1/chat/completions", json=chat_body(messages=turns))
    prompt = engine.tokenizer.decode(engine.calls[0].prompt_token_ids)
    assert "<|assistant|>[thought:They greet me.]Hello!<|user|>How are you?" in prompt
