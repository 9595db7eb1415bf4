"""The OpenAI Agents SDK against the real server and engine: an agent's answer, greedy."""

from __future__ import annotations

import httpx
import pytest
from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

from tests.integration.conftest import MODEL, Server

pytestmark = pytest.mark.integration


async def test_agent_answers_and_follows_up(server: Server, sdk_ahttp: httpx.AsyncClient) -> None:
    set_tracing_disabled(True)
    client = AsyncOpenAI(
        base_url=server.base_url, api_key="unused", max_retries=0, http_client=sdk_ahttp
    )
    agent = Agent(
        name="geography",
        instructions="Answer in one short sentence.",
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        model_settings=ModelSettings(temperature=0, max_tokens=16),
    )
    first = await Runner.run(agent, "What is the capital of France?")
    assert "Paris" in first.final_output
    (raw,) = first.raw_responses
    assert 0 < raw.usage.output_tokens <= 16

    # The follow-up sends only the new question; the server rebuilds the first turn.
    second = await Runner.run(
        agent, "Repeat that city's name.", previous_response_id=first.last_response_id
    )
    assert second.final_output
    assert second.raw_responses[0].usage.input_tokens > raw.usage.input_tokens
