"""LoRA adapters on the real engine: one server with LoRA on serves the base model, two
adapters from `--lora-modules`, adapters of `--lora-dir` by name, and adapters loaded at
run time. The adapters are written by the tests (benchmarks/fixtures/lora_adapter.py): nothing is
downloaded.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.fixtures.lora_adapter import write_adapter
from oai_server.assembly import EMBEDDED_MAX_MODEL_LEN
from oai_server.engine.vllm import cpu
from oai_server.engine.vllm.lora import NULL_ADAPTER
from oai_server.models.embedded_model import ensure_embedded_model
from oai_server.settings import Settings
from tests.conformance import AsyncValidatingTransport, ValidatingTransport
from tests.integration.conftest import MODEL, SDK_TIMEOUT_S, START_TIMEOUT_S, Server, run_server

pytestmark = pytest.mark.integration

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
MAX_TOKENS = 12


@pytest.fixture(scope="module")
def lora_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("adapters")
    # The weights of ad1 and ad2 (see lora_server), so each must answer as that one does.
    write_adapter(root / "by-name", seed=1)
    write_adapter(root / "runtime", seed=2)
    write_adapter(root / "wide", seed=5, rank=16)
    write_adapter(root / "other-base", seed=6, hidden=512)
    (root / "not-an-adapter").mkdir()
    corrupt = write_adapter(root / "corrupt", seed=7)
    (corrupt / "adapter_model.safetensors").write_bytes(b"\x00" * 64 + b"not safetensors")
    return root


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The adapters of --lora-modules."""
    root = tmp_path_factory.mktemp("modules")
    return {name: write_adapter(root / name, seed=seed) for name, seed in (("ad1", 1), ("ad2", 2))}


@pytest.fixture(scope="module")
def vllm_reference(modules: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What vLLM's own engine answers for each adapter of `modules` (greedy, QUESTION under
    the chat template): `vllm.LLM` with the adapter's `LoRARequest`, in a process of its
    own (tests/lora/vllm_reference.py) that ends before the module's server starts."""
    dtype = cpu.plan_kernels("auto", embedded=True, flags=cpu.cpu_flags()).dtype
    spec = {
        "model": str(ensure_embedded_model(Settings().cache_dir, dtype)),
        "dtype": dtype,
        "max_model_len": EMBEDDED_MAX_MODEL_LEN,
        "max_lora_rank": 8,
        "max_tokens": MAX_TOKENS,
        "messages": QUESTION,
        "adapters": {name: str(path) for name, path in modules.items()},
    }
    work = tmp_path_factory.mktemp("vllm-reference")
    out, log = work / "answers.json", work / "vllm.log"
    with log.open("wb") as logged:
        reference = subprocess.run(
            [sys.executable, "-m", "tests.lora.vllm_reference", str(out)],
            input=json.dumps(spec).encode(),
            stdout=logged,
            stderr=subprocess.STDOUT,
            timeout=START_TIMEOUT_S,
            check=False,
        )
    errors = [line for line in log.read_text().splitlines() if "Error" in line]
    assert reference.returncode == 0, "\n".join(errors[-20:])
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def lora_server(
    lora_dir: Path,
    modules: dict[str, Path],
    vllm_reference: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Server]:
    """The module's server (after vLLM's reference, so the two engines never overlap)."""
    flags = (
        *(flag for name, path in modules.items() for flag in ("--lora-modules", f"{name}={path}")),
        *("--lora-dir", str(lora_dir), "--allow-runtime-lora"),
        *("--max-lora-rank", "8", "--max-loras", "2", "--max-cpu-loras", "4"),
    )
    with run_server(tmp_path_factory.mktemp("lora"), *flags) as running:
        yield running


def post(server: Server, path: str, body: dict[str, Any]) -> httpx.Response:
    with httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S) as http:
        return http.post(f"{server.root}{path}", json=body)


def listed_models(server: Server) -> list[dict[str, Any]]:
    """`GET /v1/models`, checked against the spec."""
    with httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S) as http:
        data: list[dict[str, Any]] = http.get(f"{server.base_url}/models").json()["data"]
        return data


def chat(server: Server, model: str) -> str:
    body = {"model": model, "messages": QUESTION, "max_tokens": MAX_TOKENS, "temperature": 0}
    response = post(server, "/v1/chat/completions", body)
    assert response.status_code == 200, response.text
    assert response.json()["model"] == model
    return str(response.json()["choices"][0]["message"]["content"])


def test_models_lists_adapters_under_their_base(lora_server: Server) -> None:
    by_id = {m["id"]: m for m in listed_models(lora_server)}
    for name in ("ad1", "ad2"):
        assert by_id[name]["parent"] == MODEL
        assert by_id[name]["root"] == name
    assert by_id[MODEL]["parent"] is None


def test_each_adapter_answers_its_own_way(lora_server: Server) -> None:
    base, ad1, ad2 = (chat(lora_server, m) for m in (MODEL, "ad1", "ad2"))
    assert len({base, ad1, ad2}) == 3, (base, ad1, ad2)
    # Greedy: asked again, each answers the same.
    assert chat(lora_server, "ad1") == ad1
    completion = post(
        lora_server,
        "/v1/completions",
        {
            "model": "ad2",
            "prompt": "The capital of France is",
            "max_tokens": MAX_TOKENS,
            "temperature": 0,
        },
    )
    assert completion.status_code == 200, completion.text
    assert completion.json()["model"] == "ad2"


def test_an_adapter_answers_as_vllms_own_engine_does(
    lora_server: Server, vllm_reference: Any
) -> None:
    """The same prompt tokens, greedy, as through `vllm.LLM` with the adapter's
    `LoRARequest`: the same words."""
    tokenized = post(lora_server, "/tokenize", {"model": MODEL, "messages": QUESTION})
    assert tokenized.json()["tokens"] == vllm_reference["prompt_token_ids"]
    answers = vllm_reference["answers"]
    # Each adapter answers its own way, so an answer through the wrong adapter would show.
    assert len(set(answers.values())) == len(answers) == 2, answers
    for name, text in answers.items():
        assert chat(lora_server, name) == text, name


async def test_a_mixed_burst_gets_each_model_its_own_answer(lora_server: Server) -> None:
    """The base model and two adapters in one engine step: each answers as when asked alone
    (on CPU vLLM's kernels would give base tokens the last slot's adapter, ad1's or ad2's
    with --max-loras 2; see engine/vllm/lora_ops.py), and through the ops replaced in the
    engine core, not the null-adapter fallback (which answers the same)."""
    log = lora_server.log.read_text()
    assert "vLLM's LoRA ops could not be fixed" not in log
    assert "are not the ones oai-server can fix" not in log
    alone = {m: chat(lora_server, m) for m in (MODEL, "ad1", "ad2")}
    body = {"messages": QUESTION, "max_tokens": MAX_TOKENS, "temperature": 0}
    burst = [MODEL, "ad1", "ad2"] * 3
    steps: list[tuple[float, frozenset[str]]] = []
    transport = AsyncValidatingTransport()
    async with httpx.AsyncClient(transport=transport, timeout=SDK_TIMEOUT_S) as http:

        async def ask(model: str) -> tuple[str, str]:
            url = f"{lora_server.base_url}/chat/completions"
            response = await http.post(url, json={**body, "model": model})
            assert response.status_code == 200, response.text
            return model, response.json()["choices"][0]["message"]["content"]

        async def watch(answering: asyncio.Future[Any]) -> None:
            # vLLM sets its running gauge and its LoRA series from the same engine step;
            # one scrape reads both of the last step.
            while not answering.done():
                text = (await http.get(f"{lora_server.root}/metrics")).text
                steps.append(last_step(text))
                await asyncio.sleep(0.02)

        answering = asyncio.gather(*(ask(m) for m in burst))
        await asyncio.gather(answering, watch(answering))
        answers = answering.result()
    for model, text in answers:
        assert text == alone[model], model
    # Base-model requests run without an adapter: the null adapter never ran.
    assert all(NULL_ADAPTER not in adapters for _, adapters in steps), steps
    # One step ran both adapters' requests and a base one (more than the six of ad1 and ad2).
    shared = [n for n, adapters in steps if adapters == {"ad1", "ad2"} and n > 6]
    assert shared, steps


def last_step(metrics: str) -> tuple[float, frozenset[str]]:
    """The requests running at the engine's last step, and the adapters among them (the
    `vllm:lora_requests_info` series set last: its value is when)."""
    running = re.search(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", metrics, re.M)
    assert running is not None, "vllm:num_requests_running"
    series = re.findall(r"^vllm:lora_requests_info\{([^}]*)\} (\S+)$", metrics, re.M)
    if not series:
        return float(running[1]), frozenset()
    labels, _ = max(series, key=lambda found: float(found[1]))
    named = re.search(r'running_lora_adapters="([^"]*)"', labels)
    adapters = frozenset(filter(None, (named[1] if named else "").split(",")))
    return float(running[1]), adapters


def test_metrics_name_the_adapter_beside_vllms_own(lora_server: Server) -> None:
    """Our series carry the adapter in `model`; vLLM's LoRA gauge is there as under `vllm serve`."""
    chat(lora_server, "ad2")
    text = httpx.get(f"{lora_server.root}/metrics", timeout=10).text
    generated = re.search(r'^oai_generation_tokens_total\{model="ad2"\} (\S+)$', text, re.M)
    assert generated is not None
    assert float(generated[1]) > 0
    assert re.search(r"^vllm:lora_requests_info\{", text, re.M), "vllm:lora_requests_info"


def test_an_adapter_of_lora_dir_loads_on_first_use(lora_server: Server) -> None:
    by_name = chat(lora_server, "by-name")
    assert by_name == chat(lora_server, "ad1")
    assert by_name != chat(lora_server, MODEL)
    ids = [m["id"] for m in listed_models(lora_server)]
    assert "by-name" in ids
    for bad in ("..", ".hidden", "a/b"):
        response = post(lora_server, "/v1/chat/completions", {"model": bad, "messages": QUESTION})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == "model"


def test_load_use_unload_at_run_time(lora_server: Server, lora_dir: Path) -> None:
    loaded = post(lora_server, "/v1/load_lora_adapter", {"lora_name": "rt", "lora_path": "runtime"})
    assert loaded.status_code == 200, loaded.text
    assert chat(lora_server, "rt") == chat(lora_server, "ad2")
    again = post(lora_server, "/v1/load_lora_adapter", {"lora_name": "rt", "lora_path": "runtime"})
    assert again.status_code == 400
    assert again.json()["error"]["param"] == "lora_name"
    assert post(lora_server, "/v1/unload_lora_adapter", {"lora_name": "rt"}).status_code == 200
    gone = post(lora_server, "/v1/chat/completions", {"model": "rt", "messages": QUESTION})
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "model_not_found"
    unknown = post(lora_server, "/v1/unload_lora_adapter", {"lora_name": "rt"})
    assert unknown.status_code == 404


@pytest.mark.parametrize(
    ("name", "path", "param"),
    [
        ("wide", "wide", "lora_path"),  # rank 16 over --max-lora-rank 8
        ("other", "other-base", "lora_path"),  # weights shaped for another model
        ("none", "not-an-adapter", "lora_path"),
        ("corrupt", "corrupt", "lora_path"),
        ("outside", "../", "lora_path"),
        (MODEL, "runtime", "lora_name"),  # the base model's own name
        ("ad1", "runtime", "lora_name"),
    ],
)
def test_a_bad_adapter_is_a_400_and_harms_nothing(
    lora_server: Server, name: str, path: str, param: str
) -> None:
    before = chat(lora_server, "ad1")
    response = post(lora_server, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert "/tmp" not in response.text
    assert httpx.get(f"{lora_server.root}/health", timeout=10).status_code == 200
    assert chat(lora_server, "ad1") == before
