"""Two chat models and the embedding model in one real server (`--models-file`), each on
its own engine: requests to each, interleaved under concurrency, answered by their own.

The second chat model is the embedded model's weights under another chat template (links
to the real files, its template rewritten to a pirate's system prompt), written here, so
the two answer the same question differently and greedily; each concurrent answer must
be the one its model gives alone. Engines kept small (512-token context, 1 GiB of KV
cache each) so the three fit beside the rest of the suite.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oai_server.engine.vllm import cpu
from oai_server.models.embedded_model import ensure_embedded_model
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport, ValidatingTransport
from tests.integration.conftest import EMBEDDING_MODEL, SDK_TIMEOUT_S, Server, run_server

pytestmark = pytest.mark.integration

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
MAX_TOKENS = 16
SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
PIRATE_SYSTEM = "You are a pirate. You always answer in pirate speak, starting with Arr!"


@pytest.fixture(scope="module")
def pirate_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The embedded model's directory at the dtype the server picks for it here, with a
    pirate's system prompt in its chat template; and that dtype."""
    dtype = cpu.plan_kernels("auto", embedded=True, flags=cpu.cpu_flags()).dtype
    source = ensure_embedded_model(Settings().cache_dir, dtype)
    target = tmp_path_factory.mktemp("pirate-model")
    for path in source.iterdir():
        if path.name != "chat_template.jinja":
            (target / path.name).symlink_to(path)
    template = (source / "chat_template.jinja").read_text()
    assert SMOL_SYSTEM in template
    (target / "chat_template.jinja").write_text(template.replace(SMOL_SYSTEM, PIRATE_SYSTEM))
    return target, dtype


@pytest.fixture(scope="module")
def server(
    pirate_model: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    directory, dtype = pirate_model
    small = "    max_model_len: 512\n    cpu_kvcache_space: 1\n"
    models = tmp_path_factory.mktemp("models") / "models.yaml"
    models.write_text(
        "models:\n"
        f"  - name: smol\n{small}"
        f"  - name: pirate\n    model: {directory}\n    dtype: {dtype}\n{small}"
        f"  - name: {EMBEDDING_MODEL}\n    kind: embedding\n"
    )
    with run_server(tmp_path_factory.mktemp("several"), "--models-file", str(models)) as running:
        yield running


async def _chat(http: httpx.AsyncClient, server: Server, model: str) -> str:
    body = {"model": model, "messages": QUESTION, "max_tokens": MAX_TOKENS, "temperature": 0}
    response = await http.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["model"] == model
    return str(response.json()["choices"][0]["message"]["content"])


async def _embed(http: httpx.AsyncClient, server: Server) -> list[float]:
    body = {"model": EMBEDDING_MODEL, "input": "The capital of France is Paris."}
    response = await http.post(f"{server.base_url}/embeddings", json=body)
    assert response.status_code == 200, response.text
    vector: list[float] = response.json()["data"][0]["embedding"]
    return vector


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=AsyncValidatingTransport(), timeout=SDK_TIMEOUT_S)


def test_every_model_is_listed_and_named_ready(server: Server) -> None:
    with httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S) as http:
        listed = http.get(f"{server.base_url}/models").json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in listed] == [
        ("smol", 512),
        ("pirate", 512),
        (EMBEDDING_MODEL, 256),
    ]
    assert str(server.log.parent) not in str(listed)  # `root` names no path
    ready = next(line for line in server.log.read_text().splitlines() if "ready in" in line)
    assert "models smol (" in ready
    assert ", pirate (" in ready
    assert f"embedding model {EMBEDDING_MODEL} (float32)" in ready


async def test_interleaved_requests_are_each_answered_by_their_own_model(
    server: Server,
) -> None:
    async with _client() as http:
        alone: dict[str, Any] = {m: await _chat(http, server, m) for m in ("smol", "pirate")}
        alone[EMBEDDING_MODEL] = await _embed(http, server)
        assert alone["smol"] != alone["pirate"], alone

        async def ask(model: str) -> tuple[str, Any]:
            if model == EMBEDDING_MODEL:
                return model, await _embed(http, server)
            return model, await _chat(http, server, model)

        answers = await asyncio.gather(*(ask(m) for m in ["smol", "pirate", EMBEDDING_MODEL] * 3))
    for model, answer in answers:
        if model == EMBEDDING_MODEL:
            assert _cosine(answer, alone[model]) > 0.999
        else:
            assert answer == alone[model], model


async def test_metrics_carry_each_model_and_vllms_series_stay_the_firsts(
    server: Server,
) -> None:
    async with _client() as http:
        await _chat(http, server, "pirate")
        text = (await http.get(f"{server.root}/metrics")).text
    for model in ("smol", "pirate"):
        assert f'oai_generation_tokens_total{{model="{model}"}}' in text
        assert f'model="{model}",route="/v1/chat/completions",status="200"' in text
    assert f'oai_embedding_inputs_total{{model="{EMBEDDING_MODEL}"}}' in text
    # vLLM's own series, as with one model: the first chat model's engine feeds them.
    named = set(re.findall(r'^vllm:[^{]*\{[^}]*model_name="([^"]*)"', text, re.MULTILINE))
    assert named == {"smol"}, named
