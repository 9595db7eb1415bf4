"""Anthropic-first clients, unchanged, against the server: LangChain's `ChatAnthropic`,
pydantic-ai's `AnthropicModel`, and a request shaped as Claude Code sends them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from oai_server.engine.fake import FakeEngine
from tests.anthropic.conftest import KEY, MODEL, WEATHER, prompt_of, server
from tests.responses.conftest import weather_reply


def _chat(root: str, **options: Any) -> ChatAnthropic:
    return ChatAnthropic(  # type: ignore[call-arg]
        model=MODEL, base_url=root, api_key=KEY, max_tokens=64, max_retries=0, **options
    )


def test_langchain_invoke_and_stream() -> None:
    engine = FakeEngine(reply="Bonjour tout le monde")
    with server(engine) as root:
        llm = _chat(root, temperature=0.0)
        answer = llm.invoke("Say hello in French.")
        chunks = list(llm.stream("Say hello in French."))
    assert answer.text == "Bonjour tout le monde"
    assert "".join(chunk.text for chunk in chunks) == "Bonjour tout le monde"
    assert answer.usage_metadata is not None
    assert answer.usage_metadata["output_tokens"] == 4
    assert answer.usage_metadata["input_tokens"] == len(engine.calls[0].prompt_token_ids)
    # LangChain sends sampling in the body, as older Anthropic clients do.
    assert engine.calls[0].options.temperature == 0.0


def test_langchain_tools_and_a_tool_result_turn(template: Path) -> None:
    engine = FakeEngine(reply_for=weather_reply)
    with server(engine, chat_template=template) as root:
        llm = _chat(root).bind_tools([WEATHER])
        question = HumanMessage("Weather in Paris?")
        called = llm.invoke([question])
        assert isinstance(called, AIMessage)
        (call,) = called.tool_calls
        assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"})
        answer = llm.invoke([question, called, ToolMessage("sunny", tool_call_id=call["id"] or "")])
    assert answer.text == "It is sunny in Paris."
    assert f"<|tool|>sunny[for {call['id']}]" in prompt_of(engine)


def _pydantic_ai_model(api: str, root: str) -> tuple[Model, Any]:
    """pydantic-ai's model of `api` on the server, and the SDK client it uses (to close)."""
    if api == "anthropic":
        client: Any = anthropic.AsyncAnthropic(base_url=root, api_key=KEY, max_retries=0)
        return AnthropicModel(MODEL, provider=AnthropicProvider(anthropic_client=client)), client
    client = openai.AsyncOpenAI(base_url=f"{root}/v1", api_key=KEY, max_retries=0)
    return OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)), client


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_a_pydantic_ai_agent_calls_its_tool_and_answers_from_it(
    api: str, template: Path
) -> None:
    engine = FakeEngine(reply_for=weather_reply)
    with server(engine, chat_template=template) as root:
        model, client = _pydantic_ai_model(api, root)
        agent = Agent(model, model_settings={"max_tokens": 64})
        cities = []

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """The weather in a city."""
            cities.append(city)
            return "sunny"

        try:
            result = await agent.run("Weather in Paris?")
        finally:
            await client.close()
    assert cities == ["Paris"]
    assert result.output == "It is sunny in Paris."
    assert "<|tool|>sunny" in prompt_of(engine)  # the tool's result reached the model
    assert len(engine.calls) == 2  # the call, then the answer from its result
    assert result.usage.input_tokens == sum(len(c.prompt_token_ids) for c in engine.calls)


def _claude_code_body(session: str) -> dict[str, Any]:
    """What Claude Code sends: system blocks marked for caching, dozens of tools, the
    user's id in `metadata`, a streamed answer, and beta headers beside it."""
    tools = [
        {
            "name": f"Tool{i}",
            "description": f"Does thing {i}. " * 20,
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "number"}},
                "required": ["path"],
                "additionalProperties": False,
                "$schema": "http://json-schema.org/draft-07/schema#",
            },
        }
        for i in range(24)
    ]
    return {
        "model": MODEL,
        "max_tokens": 32,
        "stream": True,
        "temperature": 1,
        "metadata": {"user_id": f"user_abc_account__session_{session}"},
        "system": [
            {
                "type": "text",
                "text": "You are Claude Code, Anthropic's official CLI for Claude.",
                "cache_control": {"type": "ephemeral"},
            },
            {
                "type": "text",
                "text": "You are an interactive CLI tool that helps users. " * 30,
                "cache_control": {"type": "ephemeral"},
            },
        ],
        "tools": tools,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>Context.</system-reminder>"},
                    {
                        "type": "text",
                        "text": "List the files.",
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            }
        ],
    }


def test_a_claude_code_request_is_answered() -> None:
    engine = FakeEngine(reply="Here are the files.", prefix_cache=True, max_model_len=65536)
    headers = {
        "x-api-key": KEY,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
        "user-agent": "claude-cli/1.0.0 (external, cli)",
    }
    with server(engine, api_key=[KEY]) as root:
        finals = []
        for _ in range(2):  # the second turn's prefix is the first's
            with httpx.stream(
                "POST", f"{root}/v1/messages", json=_claude_code_body("s1"), headers=headers
            ) as response:
                assert response.status_code == 200, response.read()
                data = [
                    json.loads(line.removeprefix("data: "))
                    for line in response.iter_lines()
                    if line.startswith("data: ")
                ]
            finals.append(data[-2])
    text = "".join(
        d["delta"]["text"]
        for d in data
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "text_delta"
    )
    assert text == "Here are the files."
    assert data[-1] == {"type": "message_stop"}
    first, second = (final["usage"] for final in finals)
    assert first["cache_read_input_tokens"] == 0
    assert second["cache_read_input_tokens"] > 0
    assert "Tool23" in prompt_of(engine)  # every tool reached the template
    assert engine.calls[0].options.temperature == 1
