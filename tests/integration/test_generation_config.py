"""The model's `generation_config.json` sets the sampling a request leaves out, as `vllm serve`.

The embedded model's weights are served from a directory whose generation config says
`temperature: 0` (links to the real files, that one file rewritten): requests without
`temperature` must then answer exactly as greedy decoding does, a request's own
temperature still wins, and `--generation-config vllm` falls back to OpenAI's default of 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oai_server.models.embedded_model import ensure_embedded_model
from oai_server.settings import Settings
from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, SDK_TIMEOUT_S, Server, run_server

pytestmark = pytest.mark.integration

QUESTION = [{"role": "user", "content": "Tell me a short story about a cat."}]
SEEDS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def greedy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded model, its generation config saying temperature 0."""
    source = ensure_embedded_model(Settings().cache_dir)
    target = tmp_path_factory.mktemp("greedy-model")
    for path in source.iterdir():
        if path.name != "generation_config.json":
            (target / path.name).symlink_to(path)
    config = json.loads((source / "generation_config.json").read_text())
    config.update(temperature=0.0, top_p=1.0)
    (target / "generation_config.json").write_text(json.dumps(config))
    return target


def flags(model: Path, *extra: str) -> tuple[str, ...]:
    return ("--model", str(model), "--served-model-name", MODEL, "--max-model-len", "2048", *extra)


@pytest.fixture(scope="module")
def greedy_server(greedy_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with run_server(tmp_path_factory.mktemp("greedy"), *flags(greedy_model)) as running:
        yield running


def chat(server: Server, **fields: Any) -> str:
    body = {"model": MODEL, "messages": QUESTION, "max_tokens": 16, **fields}
    with httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S) as http:
        response = http.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def test_requests_without_temperature_answer_greedily(greedy_server: Server) -> None:
    greedy = chat(greedy_server, temperature=0)
    # Seeds make a sampled answer reproducible, not greedy: only temperature 0 makes these equal.
    assert [chat(greedy_server, seed=seed) for seed in SEEDS] == [greedy] * len(SEEDS)
    assert "sampling defaults from the model's generation config: temperature=0.0" in (
        greedy_server.log.read_text()
    )


def test_the_requests_own_temperature_wins(greedy_server: Server) -> None:
    greedy = chat(greedy_server, temperature=0)
    hot = [chat(greedy_server, temperature=1.5, seed=seed) for seed in SEEDS]
    assert any(answer != greedy for answer in hot), hot


def test_generation_config_vllm_samples_at_openais_default(
    greedy_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    log_dir = tmp_path_factory.mktemp("vllm-defaults")
    with run_server(log_dir, *flags(greedy_model, "--generation-config", "vllm")) as server:
        greedy = chat(server, temperature=0)
        sampled = [chat(server, seed=seed) for seed in SEEDS]
    assert any(answer != greedy for answer in sampled), sampled
