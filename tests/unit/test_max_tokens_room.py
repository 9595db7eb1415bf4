"""A `max_tokens` past the room the prompt leaves in the context, on every API.

Agents ask for 32,000 output tokens (Claude Code does on every request), which the official
APIs' 200k contexts hold and few self-hosted ones do: the answer runs to the end of the
context and ends there for length, as `vllm serve` answers; `--strict-max-tokens` refuses
it as OpenAI does. A prompt that alone fills the context is refused either way.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import openai
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.types import SamplingDefaults
from oai_server.engine.vllm.engine import sampling_defaults
from oai_server.settings import Settings
from tests.live import serve_async
from tests.realtime.conftest import client_for, events_until, realtime_server
from tests.unit.conftest import MODEL, serve

CONTEXT = 200
AGENTS_ASK = 32_000
HI = [{"role": "user", "content": "Hi"}]


def engine(max_model_len: int = CONTEXT, **options: Any) -> FakeEngine:
    # A reply longer than any context here: the answer runs as long as it is let.
    return FakeEngine(max_model_len=max_model_len, tokens=["go "] * 10_000, **options)


def room_left(fake: FakeEngine) -> int:
    """The tokens the last prompt left in the context."""
    return CONTEXT - len(fake.calls[-1].prompt_token_ids)


@asynccontextmanager
async def sdks(
    fake: FakeEngine, **settings: Any
) -> AsyncIterator[tuple[openai.AsyncOpenAI, anthropic.AsyncAnthropic]]:
    """The OpenAI and Anthropic SDKs on the app, served by uvicorn."""
    async with (
        serve_async(create_app(Settings(**settings), fake)) as root,
        openai.AsyncOpenAI(base_url=f"{root}/v1", api_key="k", max_retries=0) as oai,
        anthropic.AsyncAnthropic(base_url=root, api_key="k", max_retries=0) as claude,
    ):
        yield oai, claude


async def test_chat_and_completions_answer_to_the_end_of_the_context() -> None:
    fake = engine()
    async with sdks(fake) as (oai, _):
        chat = await oai.chat.completions.create(model=MODEL, messages=HI, max_tokens=AGENTS_ASK)  # type: ignore[arg-type]
        assert chat.choices[0].finish_reason == "length"
        assert chat.usage is not None
        assert chat.usage.prompt_tokens + chat.usage.completion_tokens == CONTEXT
        newer = await oai.chat.completions.create(
            model=MODEL,
            messages=HI,  # type: ignore[arg-type]
            max_completion_tokens=AGENTS_ASK,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in newer]
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
        assert fake.calls[-1].options.max_tokens == room_left(fake)
        text = await oai.completions.create(model=MODEL, prompt="Once", max_tokens=AGENTS_ASK)
        assert text.choices[0].finish_reason == "length"
        assert text.usage is not None
        assert text.usage.prompt_tokens + text.usage.completion_tokens == CONTEXT


async def test_responses_end_incomplete_at_the_end_of_the_context() -> None:
    fake = engine()
    async with sdks(fake) as (oai, _):
        response = await oai.responses.create(
            model=MODEL, input="Hi", max_output_tokens=AGENTS_ASK, store=False
        )
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert fake.calls[-1].options.max_tokens == room_left(fake)


async def test_messages_stop_for_max_tokens_at_the_end_of_the_context() -> None:
    fake = engine()
    async with sdks(fake) as (_, claude):
        message = await claude.messages.create(
            model=MODEL,
            max_tokens=AGENTS_ASK,
            messages=[{"role": "user", "content": "Hi"}],
            timeout=30,  # else the SDK wants a stream for so many tokens
        )
        assert message.stop_reason == "max_tokens"
        assert fake.calls[-1].options.max_tokens == room_left(fake)
        async with claude.messages.stream(
            model=MODEL,
            max_tokens=AGENTS_ASK,
            messages=[{"role": "user", "content": "Hi"}],
            timeout=30,  # else the SDK wants a stream for so many tokens
        ) as stream:
            streamed = await stream.get_final_message()
    assert streamed.stop_reason == "max_tokens"
    assert streamed.usage.output_tokens == room_left(fake)


async def test_realtime_answers_to_the_end_of_the_context() -> None:
    fake = engine()
    async with (
        realtime_server(fake) as root,
        client_for(root).realtime.connect(model=MODEL) as conn,
    ):
        await events_until(conn, "session.created")
        await conn.response.create(
            response={
                "input": [],
                "instructions": "Say hi.",
                "output_modalities": ["text"],
                "max_output_tokens": AGENTS_ASK,
            }
        )
        done = (await events_until(conn, "response.done"))[-1]
    assert done["response"]["status"] == "incomplete"
    assert fake.calls[-1].options.max_tokens == room_left(fake)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": HI, "max_tokens": AGENTS_ASK}),
        ("/v1/chat/completions", {"messages": HI, "max_completion_tokens": AGENTS_ASK}),
        ("/v1/completions", {"prompt": "Once", "max_tokens": AGENTS_ASK}),
        ("/v1/responses", {"input": "Hi", "max_output_tokens": AGENTS_ASK}),
    ],
)
async def test_strict_max_tokens_refuses_as_openai_does(path: str, body: dict[str, Any]) -> None:
    fake = engine()
    async with serve(fake, strict_max_tokens=True) as http:
        response = await http.post(path, json={"model": MODEL, **body})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert f"{AGENTS_ASK} in the completion" in error["message"]
    assert fake.calls == []


async def test_strict_max_tokens_refuses_a_message_in_anthropics_shape() -> None:
    async with sdks(engine(), strict_max_tokens=True) as (_, claude):
        with pytest.raises(anthropic.BadRequestError) as refused:
            await claude.messages.create(
                model=MODEL,
                max_tokens=AGENTS_ASK,
                messages=[{"role": "user", "content": "Hi"}],
                timeout=30,
            )
    # Anthropic's own words, which agents match to lower their max_tokens.
    message = refused.value.body["error"]["message"]  # type: ignore[index]
    assert re.fullmatch(
        r"input length and `max_tokens` exceed context limit: \d+ \+ 32000 > 200, "
        r"decrease input length or `max_tokens` and try again",
        message,
    )


async def test_a_message_whose_prompt_fills_the_context_is_too_long_in_anthropics_words() -> None:
    fake = engine()
    async with sdks(fake) as (_, claude):
        with pytest.raises(anthropic.BadRequestError) as refused:
            await claude.messages.create(
                model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "x" * 300}]
            )
    message = refused.value.body["error"]["message"]  # type: ignore[index]
    assert re.fullmatch(r"prompt is too long: 3\d\d tokens > 200 maximum", message)
    assert refused.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


@pytest.mark.parametrize("strict", [False, True])
async def test_a_prompt_that_fills_the_context_is_refused_either_way(strict: bool) -> None:
    fake = engine()
    long = [{"role": "user", "content": "x" * CONTEXT}]
    async with serve(fake, strict_max_tokens=strict) as http:
        chat = await http.post(
            "/v1/chat/completions", json={"model": MODEL, "messages": long, "max_tokens": 1}
        )
        text = await http.post(
            "/v1/completions", json={"model": MODEL, "prompt": "y" * CONTEXT, "max_tokens": 1}
        )
    for response, param in ((chat, "messages"), (text, "prompt")):
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "context_length_exceeded"
        assert response.json()["error"]["param"] == param
    assert fake.calls == []


async def test_a_long_prompt_asking_past_the_room_is_answered_unless_strict() -> None:
    """The bound worked out before tokenizing (a prompt of more than 4 characters a
    token of the context) lets through what fits, and refuses only under strict."""
    fake = engine(max_model_len=8192)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "word " * 900}]}
    body["max_tokens"] = AGENTS_ASK
    async with serve(fake) as http:
        answered = await http.post("/v1/chat/completions", json=body)
    async with serve(fake, strict_max_tokens=True) as http:
        refused = await http.post("/v1/chat/completions", json=body)
    assert answered.status_code == 200, answered.text
    assert answered.json()["choices"][0]["finish_reason"] == "length"
    assert refused.json()["error"]["code"] == "context_length_exceeded"


async def test_the_generation_configs_cap_bounds_a_requests_own_max_tokens() -> None:
    fake = engine(sampling_defaults=SamplingDefaults(max_tokens=50, max_tokens_cap=5))
    async with serve(fake) as http:
        asked = await http.post(
            "/v1/chat/completions", json={"model": MODEL, "messages": HI, "max_tokens": 30}
        )
        assert asked.json()["usage"]["completion_tokens"] == 5
        left_out = await http.post("/v1/chat/completions", json={"model": MODEL, "messages": HI})
        assert left_out.json()["usage"]["completion_tokens"] == 5


def test_the_cap_is_read_as_vllm_serve_reads_it() -> None:
    """`max_new_tokens` bounds every request when --override-generation-config sets it, or
    when --generation-config names a directory whose config has it; `auto`'s own
    `max_new_tokens` is only the default of a request that sets none."""
    params = {"max_tokens": 64}
    assert sampling_defaults(params, "auto", {}) == SamplingDefaults(max_tokens=64)
    overridden = sampling_defaults(params, "vllm", {"max_new_tokens": 8})
    assert overridden.max_tokens_cap == 8
    assert sampling_defaults(params, "/models/gen", {}).max_tokens_cap == 64


async def test_limits_count_the_budget_as_it_is_cut() -> None:
    """32,000 asked on a 200-token context reserves at most 200 tokens of the minute's 1,000,
    and passes a 1,000-token bound on one request's work."""
    fake = engine()
    body = {"model": MODEL, "messages": HI, "max_tokens": AGENTS_ASK}
    async with serve(fake, rate_limit_tpm=1000, max_request_tokens=1000) as http:
        answers = [await http.post("/v1/chat/completions", json=body) for _ in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 200]
