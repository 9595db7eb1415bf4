"""A real agent framework on the Responses API: the OpenAI Agents SDK (`openai-agents`).

Its default model, `OpenAIResponsesModel`, speaks `/v1/responses`; the agent loop sends the
function call and its output back as Responses items, and its multi-turn modes keep the
state on the server (`previous_response_id`, `conversation`) or in the Conversations API
(`OpenAIConversationsSession`). Every body and event it receives is checked against the spec.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    FunctionTool,
    OpenAIConversationsSession,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent

from oai_server.engine.fake import FakeEngine
from tests.conformance import AsyncValidatingTransport
from tests.live import serve_async
from tests.responses.conftest import CALL, CALLED, app_on, prompt_of
from tests.store.conftest import MODEL

ANSWER = "It is sunny in Paris."
FOLLOW_UP = "And tomorrow?"
LATER = "Still sunny tomorrow."


# What a user reads back from the server's state after two turns.
TRANSCRIPT = [
    ("user", "Weather in Paris?"),
    ("function_call", "get_weather", {"city": "Paris"}),
    ("function_call_output", "sunny"),
    ("assistant", ANSWER),
    ("user", FOLLOW_UP),
    ("assistant", LATER),
]


def summary(item: dict[str, Any]) -> tuple[Any, ...]:
    """An item as the transcript above writes it."""
    if item["type"] == "function_call":
        return ("function_call", item["name"], json.loads(item["arguments"]))
    if item["type"] == "function_call_output":
        return ("function_call_output", item["output"])
    (part,) = item["content"]
    return (item["role"], part["text"])


def assert_rebuilt(prompt: str) -> None:
    """The follow-up's prompt holds the first turn once: question, call, result, answer."""
    for earlier in ("<|user|>Weather in Paris?", CALLED, "<|tool|>sunny", ANSWER):
        assert prompt.count(earlier) == 1, earlier
    assert prompt.endswith(f"<|user|>{FOLLOW_UP}\n<|assistant|>")


def reply(prompt: str) -> str:
    """Calls the tool for a question about Paris, answers from its result, else answers on."""
    turn = prompt.rsplit("<|user|>", 1)[-1]
    if "<|tool|>" in turn:
        return ANSWER
    return CALL if "Paris" in turn else LATER


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    # The SDK would otherwise export traces to OpenAI's platform from a background thread.
    set_tracing_disabled(True)


@pytest.fixture
def cities() -> list[str]:
    return []


@pytest.fixture
def weather_tool(cities: list[str]) -> FunctionTool:
    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        cities.append(city)
        return "sunny"

    return get_weather


@asynccontextmanager
async def agent_on(
    tmp_path: Path, template: Path, engine: FakeEngine, tool: FunctionTool
) -> AsyncIterator[tuple[Agent, AsyncOpenAI]]:
    """An agent whose model is our server behind a real uvicorn, on a SQLite store."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    async with (
        serve_async(app_on(url, template, engine)) as base,
        httpx.AsyncClient(transport=AsyncValidatingTransport(), timeout=60) as http,
    ):
        client = AsyncOpenAI(
            base_url=f"{base}/v1", api_key="sk-test", max_retries=0, http_client=http
        )
        agent = Agent(
            name="weather",
            instructions="Answer with the tool.",
            tools=[tool],
            model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        )
        yield agent, client


async def test_agent_runs_a_function_tool(
    tmp_path: Path, template: Path, weather_tool: FunctionTool, cities: list[str]
) -> None:
    engine = FakeEngine(reply_for=reply)
    async with agent_on(tmp_path, template, engine, weather_tool) as (agent, _):
        result = await Runner.run(agent, "Weather in Paris?")
    assert cities == ["Paris"]
    assert result.final_output == ANSWER
    assert CALLED in prompt_of(engine)
    assert "<|tool|>sunny" in prompt_of(engine)
    assert prompt_of(engine).startswith("<|system|>Answer with the tool.")


async def test_streamed_agent_run(
    tmp_path: Path, template: Path, weather_tool: FunctionTool, cities: list[str]
) -> None:
    engine = FakeEngine(reply_for=reply)
    async with agent_on(tmp_path, template, engine, weather_tool) as (agent, _):
        run = Runner.run_streamed(agent, "Weather in Paris?")
        deltas: list[str] = []
        items: list[str] = []
        async for event in run.stream_events():
            if event.type == "raw_response_event" and isinstance(
                event.data, ResponseTextDeltaEvent
            ):
                deltas.append(event.data.delta)
            elif event.type == "run_item_stream_event":
                items.append(event.item.type)
    assert cities == ["Paris"]
    assert "".join(deltas) == run.final_output == ANSWER
    assert items == ["tool_call_item", "tool_call_output_item", "message_output_item"]


async def test_follow_up_by_previous_response_id(
    tmp_path: Path, template: Path, weather_tool: FunctionTool
) -> None:
    engine = FakeEngine(reply_for=reply)
    async with agent_on(tmp_path, template, engine, weather_tool) as (agent, _):
        first = await Runner.run(agent, "Weather in Paris?", auto_previous_response_id=True)
        second = await Runner.run(agent, FOLLOW_UP, previous_response_id=first.last_response_id)
    assert second.final_output == LATER
    # The follow-up sent only the new question; the server rebuilt the earlier turns.
    assert_rebuilt(prompt_of(engine))


async def test_follow_up_in_a_conversation(
    tmp_path: Path, template: Path, weather_tool: FunctionTool
) -> None:
    engine = FakeEngine(reply_for=reply)
    async with agent_on(tmp_path, template, engine, weather_tool) as (agent, client):
        conversation = await client.conversations.create()
        await Runner.run(agent, "Weather in Paris?", conversation_id=conversation.id)
        second = await Runner.run(agent, FOLLOW_UP, conversation_id=conversation.id)
        items = client.conversations.items.list(conversation.id, order="asc")
        stored = [summary(item.model_dump()) async for item in items]
    assert second.final_output == LATER
    assert_rebuilt(prompt_of(engine))
    assert stored == TRANSCRIPT


async def test_conversations_session(
    tmp_path: Path, template: Path, weather_tool: FunctionTool
) -> None:
    engine = FakeEngine(reply_for=reply)
    async with agent_on(tmp_path, template, engine, weather_tool) as (agent, client):
        # The session keeps the transcript in the Conversations API and sends it all back
        # as input items, ids and statuses included.
        session = OpenAIConversationsSession(openai_client=client)
        await Runner.run(agent, "Weather in Paris?", session=session)
        second = await Runner.run(agent, FOLLOW_UP, session=session)
        stored = await session.get_items()
    assert second.final_output == LATER
    assert_rebuilt(prompt_of(engine))
    assert [summary(dict(item)) for item in stored] == TRANSCRIPT
