"""Agent frameworks read the tool calls of a non-Hermes family: Kimi K2's, read by vLLM's
kimi_k2 parser the server picked by itself, through LangChain's `ChatOpenAI` and the OpenAI
Agents SDK's chat-completions model, whole and streamed (fake engine, real HTTP)."""

from __future__ import annotations

import importlib
import json

import httpx
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.vllm.holder import VLLMTokenizer
from oai_server.settings import Settings
from tests.live import serve_async
from tests.unit.tool_families import FAMILIES, family_tokenizer, pieces

# vLLM's parsers load with the server's start (seconds): loaded first, so the live server
# starts within its time.
importlib.import_module("vllm.parser")
KIMI = next(f for f in FAMILIES if f.name == "kimi-k2")
MODEL = "smollm2-135m-instruct"


def _app(text: str) -> object:
    tokenizer = family_tokenizer(KIMI)
    engine = FakeEngine(tokens=pieces(tokenizer, text), model_tokenizer=VLLMTokenizer(tokenizer))
    return create_app(Settings(), engine)


@tool
def get_weather(city: str) -> str:
    """The weather in `city`."""
    return "sunny"


@pytest.mark.parametrize("streaming", [False, True])
async def test_langchain_reads_kimi_calls(streaming: bool) -> None:
    assert KIMI.two is not None
    async with serve_async(_app(KIMI.two)) as url, httpx.AsyncClient() as http:
        llm = ChatOpenAI(
            base_url=f"{url}/v1",
            api_key="none",
            model=MODEL,
            streaming=streaming,
            http_async_client=http,
        ).bind_tools([get_weather])
        message = await llm.ainvoke("Weather in Oslo, and the time?")
    calls = [(c["name"], c["args"]) for c in message.tool_calls]
    assert calls == [("get_weather", {"city": "Oslo"}), ("get_time", {"zone": "CET"})]


async def test_agents_sdk_runs_a_kimi_call() -> None:
    set_tracing_disabled(True)
    seen: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in `city`."""
        seen.append(city)
        return "sunny"

    async with (
        serve_async(_app(KIMI.one)) as url,
        AsyncOpenAI(base_url=f"{url}/v1", api_key="none") as client,
    ):
        agent = Agent(
            name="weather",
            model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
            tools=[get_weather],
            # The scripted engine would call again: the run ends with the tool's output.
            tool_use_behavior="stop_on_first_tool",
        )
        result = await Runner.run(agent, "Weather in Oslo?")
    assert seen == ["Oslo"]
    assert result.final_output == "sunny"
    called = [i for i in result.new_items if i.type == "tool_call_item"]
    assert json.loads(called[0].raw_item.arguments) == {"city": "Oslo"}
