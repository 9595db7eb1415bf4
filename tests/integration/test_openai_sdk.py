"""The official OpenAI SDK against the real server and engine, as users call it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import openai
import pytest

from oai_server.settings import EMBEDDED_EMBEDDING_MODEL_NAME as EMBEDDING_MODEL
from tests.conformance import AsyncValidatingTransport, ValidatingTransport
from tests.integration.conftest import MODEL, SDK_TIMEOUT_S, Server

pytestmark = pytest.mark.integration

CAPITAL_QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    http = httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S)
    with openai.OpenAI(
        base_url=server.base_url, api_key="unused", http_client=http, max_retries=0
    ) as c:
        yield c


@pytest.fixture
async def aclient(server: Server) -> AsyncIterator[openai.AsyncOpenAI]:
    http = httpx.AsyncClient(transport=AsyncValidatingTransport(), timeout=SDK_TIMEOUT_S)
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="unused", http_client=http, max_retries=0
    ) as c:
        yield c


def test_factual_question_answered_correctly(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model=MODEL, messages=CAPITAL_QUESTION, temperature=0, max_tokens=24
    )
    choice = reply.choices[0]
    assert choice.message.role == "assistant"
    assert "Paris" in (choice.message.content or "")
    assert choice.finish_reason == "stop"
    assert reply.model == MODEL
    assert reply.id.startswith("chatcmpl-")
    assert reply.usage is not None
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_sync_stream_matches_non_streamed_answer(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(
        model=MODEL, messages=CAPITAL_QUESTION, temperature=0, max_tokens=24
    )
    stream = client.chat.completions.create(
        model=MODEL, messages=CAPITAL_QUESTION, temperature=0, max_tokens=24, stream=True
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({c.id for c in chunks}) == 1
    assert len({c.created for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason


async def test_async_create_and_stream(aclient: openai.AsyncOpenAI) -> None:
    reply = await aclient.chat.completions.create(
        model=MODEL, messages=CAPITAL_QUESTION, temperature=0, max_tokens=24
    )
    assert "Paris" in (reply.choices[0].message.content or "")
    stream = await aclient.chat.completions.create(
        model=MODEL, messages=CAPITAL_QUESTION, temperature=0, max_tokens=24, stream=True
    )
    pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert len([p for p in pieces if p]) > 1, "content should arrive in several deltas"
    assert "".join(pieces) == reply.choices[0].message.content


def test_n_gives_that_many_choices(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model=MODEL, messages=CAPITAL_QUESTION, n=2, max_tokens=12, temperature=0.8, seed=1
    )
    assert sorted(c.index for c in reply.choices) == [0, 1]
    assert all(c.message.content for c in reply.choices)


def test_n_with_greedy_sampling_is_accepted(client: openai.OpenAI) -> None:
    # vLLM alone refuses n > 1 at temperature 0; OpenAI does not, and neither do we.
    reply = client.chat.completions.create(
        model=MODEL, messages=CAPITAL_QUESTION, n=2, max_tokens=12, temperature=0
    )
    texts = [c.message.content for c in reply.choices]
    assert len(texts) == 2
    assert texts[0] == texts[1]


def test_streamed_n_carries_every_index(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL, messages=CAPITAL_QUESTION, n=2, max_tokens=8, temperature=0.8, stream=True
    )
    finished = {c.choices[0].index for c in stream if c.choices and c.choices[0].finish_reason}
    assert finished == {0, 1}


def test_stop_sequence_ends_and_is_not_included(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model=MODEL, prompt="1, 2, 3, 4,", temperature=0, max_tokens=30, stop=[" 7"]
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "stop"
    assert "5" in choice.text
    assert "7" not in choice.text


def test_max_tokens_one_finishes_with_length(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model=MODEL, messages=CAPITAL_QUESTION, max_tokens=1)
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 1


def test_max_completion_tokens_wins_over_max_tokens(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model=MODEL, messages=CAPITAL_QUESTION, max_tokens=50, max_completion_tokens=2
    )
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 2


def test_include_usage_sends_a_final_usage_chunk(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL,
        messages=CAPITAL_QUESTION,
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens == 5
    assert all(c.usage is None for c in chunks[:-1])


def test_completions_streamed_and_not(client: openai.OpenAI) -> None:
    whole = client.completions.create(model=MODEL, prompt="The sky is", max_tokens=8, temperature=0)
    assert whole.object == "text_completion"
    stream = client.completions.create(
        model=MODEL, prompt="The sky is", max_tokens=8, temperature=0, stream=True
    )
    assert "".join(c.choices[0].text for c in stream if c.choices) == whole.choices[0].text


def test_models_endpoints(client: openai.OpenAI) -> None:
    # The chat model, then the embedding model served beside it by default.
    assert [m.id for m in client.models.list()] == [MODEL, EMBEDDING_MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    assert client.models.retrieve(EMBEDDING_MODEL).id == EMBEDDING_MODEL
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")
