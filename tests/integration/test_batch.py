"""The Batch API on the real engine through the official SDK: greedy lines answered as the
live endpoint answers them, each output body valid against the spec."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.conformance import ValidatingTransport, validate
from tests.integration.conftest import MODEL, SDK_TIMEOUT_S, Server

pytestmark = pytest.mark.integration

QUESTIONS = ["What is the capital of France?", "Name a primary color.", "Count to three."]


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    http = httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S)
    with openai.OpenAI(
        base_url=server.base_url, api_key="unused", http_client=http, max_retries=0
    ) as c:
        yield c


def _body(question: str) -> dict[str, object]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": question}],
        "temperature": 0,
        "max_tokens": 8,
    }


def test_a_batch_answers_each_greedy_line_as_the_live_endpoint(client: openai.OpenAI) -> None:
    lines = [
        {"custom_id": f"q{i}", "method": "POST", "url": "/v1/chat/completions", "body": _body(q)}
        for i, q in enumerate(QUESTIONS)
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    file = client.files.create(file=("input.jsonl", io.BytesIO(data)), purpose="batch")
    batch = client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 120
    while batch.status not in ("completed", "failed", "cancelled", "expired"):
        assert time.monotonic() < deadline, batch.status
        time.sleep(0.5)
        batch = client.batches.retrieve(batch.id)
    assert batch.status == "completed"
    assert batch.request_counts is not None
    assert batch.request_counts.completed == len(QUESTIONS)
    assert batch.output_file_id is not None
    output = [
        json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()
    ]
    assert [line["custom_id"] for line in output] == ["q0", "q1", "q2"]
    for question, line in zip(QUESTIONS, output, strict=True):
        body = line["response"]["body"]
        validate("CreateChatCompletionResponse", body)
        live = client.chat.completions.create(**_body(question))  # type: ignore[call-overload]
        assert body["choices"][0]["message"]["content"] == live.choices[0].message.content
        assert body["usage"]["completion_tokens"] <= 8


def test_a_responses_batch_answers_each_greedy_line_as_the_live_endpoint(
    client: openai.OpenAI,
) -> None:
    bodies = [
        {"model": MODEL, "input": question, "temperature": 0, "max_output_tokens": 8}
        for question in QUESTIONS[:2]
    ]
    lines = [
        {"custom_id": f"r{i}", "method": "POST", "url": "/v1/responses", "body": body}
        for i, body in enumerate(bodies)
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    file = client.files.create(file=("input.jsonl", io.BytesIO(data)), purpose="batch")
    batch = client.batches.create(
        input_file_id=file.id, endpoint="/v1/responses", completion_window="24h"
    )
    deadline = time.monotonic() + 120
    while batch.status not in ("completed", "failed", "cancelled", "expired"):
        assert time.monotonic() < deadline, batch.status
        time.sleep(0.5)
        batch = client.batches.retrieve(batch.id)
    assert batch.status == "completed"
    assert batch.output_file_id is not None
    output = [
        json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()
    ]
    assert [line["custom_id"] for line in output] == ["r0", "r1"]
    for body, line in zip(bodies, output, strict=True):
        answer = line["response"]["body"]
        validate("Response", answer)
        live = client.responses.create(**body)  # type: ignore[call-overload]
        assert answer["output"][0]["content"][0]["text"] == live.output_text
        assert answer["usage"]["output_tokens"] <= 8
        assert client.responses.retrieve(answer["id"]).output_text == live.output_text
