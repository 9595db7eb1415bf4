"""Rerank and score on the real engine: the test cross-encoder against vLLM's own scores
(the embedded embedding model and the clients: tests/integration/test_rerank.py).

The cross-encoder (`build_test_reranker.py`) is served from a models file beside the
embedded chat model, in one module-scoped server; vLLM's reference is `LLM.score` on the
same directory (`vllm_reference.py`, run once before the server starts: starting
`vllm serve` as well would cost a third engine start for the same scores).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Server, run_server
from tests.rerank import build_test_reranker, vllm_reference

pytestmark = pytest.mark.integration

RERANKER = "test-reranker"
MAX_MODEL_LEN = 512
QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Paris is the capital and largest city of France.",
    "The mitochondrion is the powerhouse of the cell.",
    "Mount Everest is the highest mountain above sea level.",
    "France's capital has been Paris since the tenth century.",
]
PAIRS = (["a question", "another one"], ["an answer", "another answer"])


@pytest.fixture(scope="module")
def reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("test-reranker")
    subprocess.run([sys.executable, build_test_reranker.__file__, str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def reference(reranker_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[list[float]]:
    """vLLM's scores of [QUERY vs DOCUMENTS, PAIRS pairwise]."""
    out = tmp_path_factory.mktemp("reference") / "scores.json"
    spec = {
        "model": str(reranker_dir),
        "dtype": "float32",
        "max_model_len": MAX_MODEL_LEN,
        "cases": [[QUERY, DOCUMENTS], list(PAIRS)],
    }
    subprocess.run(
        [sys.executable, "-m", "tests.rerank.vllm_reference", str(out)],
        input=json.dumps(spec).encode(),
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=Path(vllm_reference.__file__).parents[2],
    )
    scores: list[list[float]] = json.loads(out.read_text())
    return scores


@pytest.fixture(scope="module")
def reranker(
    reranker_dir: Path, reference: list[list[float]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The embedded chat model and the test cross-encoder, from a models file."""
    log_dir = tmp_path_factory.mktemp("reranker-server")
    models = log_dir / "models.yaml"
    models.write_text(
        "models:\n"
        "  - name: smollm2-135m-instruct\n"
        f"  - name: {RERANKER}\n"
        "    kind: embedding\n"
        f"    model: {reranker_dir}\n"
        "    dtype: float32\n"
        f"    max_model_len: {MAX_MODEL_LEN}\n"
    )
    with run_server(log_dir, "--models-file", str(models)) as server:
        yield server


def post(server: Server, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.root}{path}", json=body, timeout=120)


@pytest.mark.parametrize("path", ["/v1/rerank", "/rerank", "/v2/rerank"])
def test_rerank_scores_are_vllms(reranker: Server, reference: list[list[float]], path: str) -> None:
    reply = post(reranker, path, {"model": RERANKER, "query": QUERY, "documents": DOCUMENTS})
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    expected = sorted(enumerate(reference[0]), key=lambda p: -p[1])
    assert [r["index"] for r in results] == [i for i, _ in expected]
    for result, (_, score) in zip(results, expected, strict=True):
        assert result["relevance_score"] == pytest.approx(score, abs=1e-5)


@pytest.mark.parametrize("path", ["/v1/score", "/score"])
def test_score_one_to_many_and_pairwise_are_vllms(
    reranker: Server, reference: list[list[float]], path: str
) -> None:
    many = post(reranker, path, {"model": RERANKER, "text_1": QUERY, "text_2": DOCUMENTS})
    pairs = post(reranker, path, {"model": RERANKER, "queries": PAIRS[0], "documents": PAIRS[1]})
    assert [d["score"] for d in many.json()["data"]] == pytest.approx(reference[0], abs=1e-5)
    assert [d["score"] for d in pairs.json()["data"]] == pytest.approx(reference[1], abs=1e-5)


def test_a_pair_over_the_context_is_refused_by_index_or_truncated(reranker: Server) -> None:
    long = "word " * 600
    refused = post(reranker, "/v1/rerank", {"query": QUERY, "documents": ["short", long]})
    cut = post(
        reranker,
        "/v1/rerank",
        {"query": QUERY, "documents": ["short", long], "truncate_prompt_tokens": MAX_MODEL_LEN},
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "documents[1]"
    assert cut.status_code == 200, cut.text
    # The long pair cut to the context: the short pair's few tokens are the rest.
    assert MAX_MODEL_LEN < cut.json()["usage"]["prompt_tokens"] < MAX_MODEL_LEN + 30


def test_a_cross_encoder_asked_for_embeddings_says_what_it_serves(reranker: Server) -> None:
    reply = post(reranker, "/v1/embeddings", {"model": RERANKER, "input": "x"})
    assert reply.status_code == 400
    assert "cross-encoder" in reply.json()["error"]["message"]
