"""LlamaIndex's `OpenAILike` against the real server and engine, as users call it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike

from tests.integration.conftest import BOUNDED_MAX_TOKENS, MODEL, SDK_TIMEOUT_S, Server

pytestmark = pytest.mark.integration

QUESTION = "What is the capital of France?"
MESSAGES = [ChatMessage(role="user", content=QUESTION)]

LLMFactory = Callable[..., OpenAILike]


@pytest.fixture
def make_llm(server: Server, sdk_http: httpx.Client, sdk_ahttp: httpx.AsyncClient) -> LLMFactory:
    """`OpenAILike` on the server, greedy, with `options` on top."""

    def make(**options: Any) -> OpenAILike:
        settings: dict[str, Any] = {
            "is_chat_model": True,
            "temperature": 0,
            "max_tokens": BOUNDED_MAX_TOKENS,
            "timeout": SDK_TIMEOUT_S,
            **options,
        }
        return OpenAILike(
            model=MODEL,
            api_base=server.base_url,
            api_key="unused",
            context_window=2048,
            max_retries=0,
            http_client=sdk_http,
            async_http_client=sdk_ahttp,
            **settings,
        )

    return make


def test_chat(make_llm: LLMFactory) -> None:
    reply = make_llm().chat(MESSAGES)
    assert reply.message.role == "assistant"
    assert "Paris" in (reply.message.content or "")
    assert reply.raw is not None
    assert reply.raw.object == "chat.completion"


def test_stream_chat_matches_chat(make_llm: LLMFactory) -> None:
    llm = make_llm(max_tokens=24)
    whole = llm.chat(MESSAGES)
    deltas = [r.delta or "" for r in llm.stream_chat(MESSAGES)]
    assert len([d for d in deltas if d]) > 1, "content should arrive in several deltas"
    assert "".join(deltas) == whole.message.content


def test_complete_on_the_completions_endpoint(make_llm: LLMFactory) -> None:
    llm = make_llm(is_chat_model=False, max_tokens=8)
    reply = llm.complete("The capital of France is")
    assert reply.text
    assert reply.raw is not None
    assert reply.raw.object == "text_completion"
    streamed = [r.delta or "" for r in llm.stream_complete("The capital of France is")]
    assert "".join(streamed) == reply.text


def test_complete_on_the_chat_endpoint(make_llm: LLMFactory) -> None:
    reply = make_llm().complete(QUESTION)
    assert "Paris" in reply.text
    assert reply.raw is not None
    assert reply.raw.object == "chat.completion"


def test_chat_through_the_completions_endpoint(make_llm: LLMFactory) -> None:
    # Without a chat model, LlamaIndex renders the messages itself and completes them.
    reply = make_llm(is_chat_model=False, max_tokens=8).chat(MESSAGES)
    assert reply.message.content


async def test_achat_and_astream_chat(make_llm: LLMFactory) -> None:
    llm = make_llm(max_tokens=24)
    whole = await llm.achat(MESSAGES)
    assert "Paris" in (whole.message.content or "")
    deltas = [r.delta or "" async for r in await llm.astream_chat(MESSAGES)]
    assert len([d for d in deltas if d]) > 1
    assert "".join(deltas) == whole.message.content
