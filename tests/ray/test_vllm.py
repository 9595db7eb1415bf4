"""One replica with the real vLLM engines and the embedded models (chat, and embeddings
beside it, as the plain server serves them), through the OpenAI SDK."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.conformance import ValidatingTransport
from tests.ray.conftest import MODEL, RayServe, deployed

pytestmark = pytest.mark.integration

EMBEDDING_MODEL = "all-minilm-l6-v2"
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
    assert [m.id for m in client.models.list()] == [MODEL, EMBEDDING_MODEL]


def test_the_replica_embeds_on_its_own_embedding_engine(client: openai.OpenAI) -> None:
    texts = ["The capital of France is Paris.", "Paris is France's capital.", "I like soup."]
    data = client.embeddings.create(model=EMBEDDING_MODEL, input=texts).data
    vectors = [item.embedding for item in data]
    assert [len(v) for v in vectors] == [384] * 3

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))  # the vectors are normalised

    # A real sentence model: the paraphrase is nearer than the unrelated sentence.
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2]) + 0.2
