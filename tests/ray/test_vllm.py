"""One replica with the real vLLM engines and the embedded models (chat, and embeddings
beside it, as the plain server serves them), through the OpenAI SDK; its engines compute on
the replica's own cores (`--ray-cpu-cores per-replica`)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import openai
import psutil
import pytest

from oai_server.ray_serve.cores import replica_cores
from tests.conformance import ValidatingTransport
from tests.ray.conftest import MODEL, RayServe, deployed

pytestmark = pytest.mark.integration

EMBEDDING_MODEL = "all-minilm-l6-v2"
QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


@pytest.fixture(scope="module")
def client(ray_serve: RayServe) -> Iterator[openai.OpenAI]:
    # Model loading runs inside the replica's constructor: Serve routes nothing before it ends.
    with (
        # Its own cores win over the cores flag (here the other core).
        deployed("vllm", ray_num_cpus=1, ray_cpu_cores="per-replica", cpu_threads_bind="1", seed=0),
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


def pinned_cores(pid: int) -> dict[int, set[int]]:
    """The threads of process `pid` that may run on one core only, and that core: vLLM's
    CPU backend pins each of its compute threads to one core of its bind list."""
    pinned: dict[int, set[int]] = {}
    for thread in psutil.Process(pid).threads():
        try:
            allowed = os.sched_getaffinity(thread.id)
        except OSError:  # the thread ended meanwhile
            continue
        if len(allowed) == 1:
            pinned[thread.id] = allowed
    return pinned


def test_the_engines_compute_on_the_replicas_own_cores(client: openai.OpenAI) -> None:
    """Read from the engines' threads themselves, not from the setting the replica passed:
    the only replica (rank 0) of one CPU computes on its slice, the first allowed core."""
    client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=2)  # type: ignore[arg-type]
    own = set(replica_cores(os.sched_getaffinity(0), 0, 1))
    # The replica's engine processes are under this test's Ray: its raylet is our child, and
    # Ray's workers are the raylet's. Other engines of the run (the shared server's, also our
    # children) compute on every core.
    raylets = [p for p in psutil.Process().children(recursive=True) if p.name() == "raylet"]
    assert raylets, "no raylet under this test's process"
    engines = [
        p
        for raylet in raylets
        for p in raylet.children(recursive=True)
        if p.name().startswith("VLLM::") or "VLLM::" in " ".join(p.cmdline())
    ]
    assert engines, "no vLLM engine process under this Ray"
    pinned = {p.pid: pinned_cores(p.pid) for p in engines}
    assert any(pinned.values()), f"no engine thread is pinned to a core: {pinned}"
    cores = {
        core for threads in pinned.values() for allowed in threads.values() for core in allowed
    }
    assert cores == own, pinned
