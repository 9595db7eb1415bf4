"""The conformance transport under the OpenAI SDK: violations are recorded even when wrapped."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.conformance import (
    ConformanceLog,
    ValidatingTransport,
)
from tests.unit.spec_examples import CHAT_COMPLETION, CHUNKS, reply, sse

# --- with the OpenAI SDK -------------------------------------------------------


def test_openai_sdk_through_transport() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=sse(*CHUNKS, "[DONE]")
            )
        return httpx.Response(200, json=CHAT_COMPLETION)

    log = ConformanceLog()
    sdk = openai.OpenAI(
        base_url="http://server/v1",
        api_key="sk-test",
        max_retries=0,
        http_client=httpx.Client(transport=ValidatingTransport(log, httpx.MockTransport(handler))),
    )
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    completion = sdk.chat.completions.create(model="m", messages=messages)
    assert completion.choices[0].finish_reason == "stop"
    text = "".join(
        c.choices[0].delta.content or ""
        for c in sdk.chat.completions.create(model="m", messages=messages, stream=True)
    )
    assert text == "Hello"
    assert (log.checked, log.violations) == (4, [])


def test_violation_recorded_even_when_sdk_wraps_it() -> None:
    log = ConformanceLog()
    bad = {**CHAT_COMPLETION, "created": "yesterday"}
    sdk = openai.OpenAI(
        base_url="http://server/v1",
        api_key="sk-test",
        max_retries=0,
        http_client=httpx.Client(
            transport=ValidatingTransport(log, httpx.MockTransport(reply(bad)))
        ),
    )
    with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK may wrap the AssertionError
        sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert [v.schema for v in log.violations] == ["CreateChatCompletionResponse"]
