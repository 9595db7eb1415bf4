"""LangChain's `ChatOpenAI` against the real server and engine, as users call it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from tests.integration.conftest import BOUNDED_MAX_TOKENS, MODEL, SDK_TIMEOUT_S, Server

pytestmark = pytest.mark.integration

QUESTION = "What is the capital of France?"


LLMFactory = Callable[..., ChatOpenAI]


@pytest.fixture
def make_llm(server: Server, sdk_http: httpx.Client, sdk_ahttp: httpx.AsyncClient) -> LLMFactory:
    """`ChatOpenAI` on the server, greedy, bounded, with `options` on top."""

    def make(**options: Any) -> ChatOpenAI:
        # Bounded, so a derailed model costs seconds, not minutes; no retry hides a 5xx.
        settings: dict[str, Any] = {"max_tokens": BOUNDED_MAX_TOKENS, **options}
        return ChatOpenAI(
            base_url=server.base_url,
            api_key="unused",
            model=MODEL,
            temperature=0,
            max_retries=0,
            timeout=SDK_TIMEOUT_S,
            http_client=sdk_http,
            http_async_client=sdk_ahttp,
            **settings,
        )

    return make


@pytest.fixture
def llm(make_llm: LLMFactory) -> ChatOpenAI:
    return make_llm()


def joined(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    return whole


def test_invoke(llm: ChatOpenAI) -> None:
    reply = llm.invoke(QUESTION)
    assert isinstance(reply, AIMessage)
    assert "Paris" in reply.text
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.response_metadata["model_name"] == MODEL


def test_stream_matches_invoke(make_llm: LLMFactory) -> None:
    llm = make_llm(max_tokens=24)
    whole = llm.invoke(QUESTION)
    chunks = list(llm.stream(QUESTION))
    assert len([c for c in chunks if c.text]) > 1, "content should arrive in several chunks"
    assert "".join(c.text for c in chunks) == whole.text


def test_batch(llm: ChatOpenAI) -> None:
    questions: list[LanguageModelInput] = [QUESTION, "What is 2 + 2?", "Name a colour."]
    replies = llm.batch(questions)
    assert len(replies) == 3
    assert all(isinstance(r, AIMessage) and r.text for r in replies)
    assert "Paris" in replies[0].text


async def test_ainvoke_and_astream(llm: ChatOpenAI) -> None:
    reply = await llm.ainvoke(QUESTION)
    assert "Paris" in reply.text
    chunks = [chunk async for chunk in llm.astream(QUESTION)]
    assert len([c for c in chunks if c.text]) > 1
    assert "".join(c.text for c in chunks) == reply.text


def test_stream_usage(make_llm: LLMFactory) -> None:
    llm = make_llm(stream_usage=True, max_tokens=24)
    whole = joined(list(llm.stream(QUESTION)))
    usage = whole.usage_metadata
    assert usage is not None
    assert usage["input_tokens"] > 0
    assert 0 < usage["output_tokens"] <= 24
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    # The same prompt costs the same without streaming.
    invoked = llm.invoke(QUESTION).usage_metadata
    assert invoked is not None
    assert invoked["input_tokens"] == usage["input_tokens"]
    assert invoked["output_tokens"] == usage["output_tokens"]


async def test_astream_usage(make_llm: LLMFactory) -> None:
    llm = make_llm(stream_usage=True, max_tokens=8)
    whole = joined([chunk async for chunk in llm.astream(QUESTION)])
    assert whole.usage_metadata is not None
    assert whole.usage_metadata["total_tokens"] == (
        whole.usage_metadata["input_tokens"] + whole.usage_metadata["output_tokens"]
    )


def test_max_tokens_finishes_with_length(make_llm: LLMFactory) -> None:
    reply = make_llm(max_tokens=2).invoke(QUESTION)
    assert reply.response_metadata["finish_reason"] == "length"
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["output_tokens"] == 2
    streamed = joined(list(make_llm(max_tokens=2).stream(QUESTION)))
    assert streamed.response_metadata["finish_reason"] == "length"


class Capital(BaseModel):
    """A country's capital city."""

    country: str
    capital: str


def test_structured_output_with_json_schema(llm: ChatOpenAI) -> None:
    structured = llm.with_structured_output(Capital, method="json_schema")
    result = structured.invoke("What is the capital of France? Answer as JSON.")
    assert isinstance(result, Capital)
    assert result.capital


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"Sunny in {city}"


def test_bind_tools_with_forced_choice(llm: ChatOpenAI) -> None:
    bound = llm.bind_tools([get_weather], tool_choice="get_weather")
    message = bound.invoke("What is the weather in Paris?")
    assert isinstance(message, AIMessage)
    (call,) = message.tool_calls
    assert call["name"] == "get_weather"
    assert isinstance(call["args"].get("city"), str)
    assert call["id"]


def test_streamed_tool_call_chunks_merge(llm: ChatOpenAI) -> None:
    bound = llm.bind_tools([get_weather], tool_choice="get_weather")
    merged: AIMessageChunk | None = None
    pieces = 0
    for chunk in bound.stream("What is the weather in Paris?"):
        assert isinstance(chunk, AIMessageChunk)
        merged = chunk if merged is None else merged + chunk
        pieces += 1
    assert merged is not None
    assert pieces > 2
    (call,) = merged.tool_calls
    assert call["name"] == "get_weather"
    assert isinstance(call["args"].get("city"), str)
