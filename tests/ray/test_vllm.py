"""One replica with the real vLLM engine and the embedded model, through the OpenAI SDK."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.conformance import ValidatingTransport
from tests.ray.conftest import MODEL, RayServe, deployed

pytestmark = pytest.mark.integration

QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


@pytest.fixture(scope="module")
def client(ray_serve: RayServe) -> Iterator[openai.OpenAI]:
    # Model loading runs inside the replica's constructor: Serve routes nothing before it ends.
    with (
        deployed("vllm", ray_num_cpus=1, seed=0),
        httpx.Client(transport=ValidatingTransport(), timeout=120) as http,
    ):
        yield openai.OpenAI(base_url=f"{ray_serve.url}/v1", api_key="unused", http_client=http)


def test_the_sdk_gets_the_same_answer_streamed_and_not(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        max_tokens=16,
        temperature=0,  # type: ignore[arg-type]
    )
    answer = whole.choices[0].message.content or ""
    assert "Paris" in answer

    pieces = []
    finish = None
    stream = client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,  # type: ignore[arg-type]
        max_tokens=16,
        temperature=0,
        stream=True,
    )
    chunks = 0
    for chunk in stream:
        chunks += 1
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(pieces) == answer
    assert finish == whole.choices[0].finish_reason
    assert chunks > 2  # token by token, not one blob
    assert [m.id for m in client.models.list()] == [MODEL]
