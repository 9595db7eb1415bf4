"""The model's `generation_config.json` sets the sampling a request leaves out, as `vllm serve`.

The embedded model's weights are served from a directory whose generation config says
`temperature: 0` (links to the real files, that one file rewritten): requests without
`temperature` must then answer exactly as greedy decoding does, a request's own
temperature still wins, and `generation_config: vllm` (`--generation-config vllm`) falls
back to OpenAI's default of 1. Both are served by one server, from a models file.
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
from tests.integration.conftest import SDK_TIMEOUT_S, Server, run_server

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


# The same weights twice: as the model's generation config says, and as vLLM's defaults.
GREEDY, VLLM_DEFAULTS = "greedy", "vllm-defaults"


@pytest.fixture(scope="module")
def server(greedy_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("greedy")
    models = root / "models.yaml"
    models.write_text(
        "models:\n"
        + "".join(
            f"  - name: {name}\n    model: {greedy_model}\n    max_model_len: 2048\n"
            f"    cpu_kvcache_space: 1\n    generation_config: {source}\n"
            for name, source in ((GREEDY, "auto"), (VLLM_DEFAULTS, "vllm"))
        )
    )
    with run_server(root, "--models-file", str(models)) as running:
        yield running


def chat(server: Server, model: str = GREEDY, **fields: Any) -> str:
    body = {"model": model, "messages": QUESTION, "max_tokens": 16, **fields}
    with httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S) as http:
        response = http.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def test_requests_without_temperature_answer_greedily(server: Server) -> None:
    greedy = chat(server, temperature=0)
    # Seeds make a sampled answer reproducible, not greedy: only temperature 0 makes these equal.
    assert [chat(server, seed=seed) for seed in SEEDS] == [greedy] * len(SEEDS)
    logged = server.log.read_text()
    assert logged.count("sampling defaults from the model's generation config") == 1, logged
    assert "sampling defaults from the model's generation config: temperature=0.0" in logged


def test_the_requests_own_temperature_wins(server: Server) -> None:
    greedy = chat(server, temperature=0)
    hot = [chat(server, temperature=1.5, seed=seed) for seed in SEEDS]
    assert any(answer != greedy for answer in hot), hot


def test_generation_config_vllm_samples_at_openais_default(server: Server) -> None:
    greedy = chat(server, VLLM_DEFAULTS, temperature=0)
    sampled = [chat(server, VLLM_DEFAULTS, seed=seed) for seed in SEEDS]
    assert any(answer != greedy for answer in sampled), sampled
