"""LoRA adapters through the whole server, on the fake engine (which answers a request to
an adapter "[name] " + its reply): routing by `model` on every endpoint, `/v1/models`,
the response cache, `--lora-dir` by name, the run-time endpoints and their refusals."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from pydantic_settings import CliApp

from benchmarks.fixtures.lora_adapter import HIDDEN, write_adapter
from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.vllm.args import engine_args
from oai_server.engine.vllm.lora import check_shapes
from oai_server.errors import InvalidRequestError
from oai_server.models.registry import DuplicateModelError
from oai_server.settings import Settings
from tests.realtime.conftest import client_for, events_until, realtime_server
from tests.unit.conftest import MODEL, chat_body, serve

REPLY = "Hello! How can I help you today?"


@pytest.fixture
def adapters(tmp_path: Path) -> Path:
    """--lora-dir: one adapter, one of too high a rank, one directory that is none."""
    write_adapter(tmp_path / "by-name", seed=1)
    write_adapter(tmp_path / "wide", seed=2, rank=32)
    (tmp_path / "empty").mkdir()
    return tmp_path


@pytest.fixture
def module(tmp_path: Path) -> str:
    return f"ad1={write_adapter(tmp_path / 'modules' / 'ad1', seed=3)}"


@pytest.fixture
async def client(module: str) -> AsyncIterator[httpx.AsyncClient]:
    # The fake serves what --lora-modules names, as the vLLM engine loads them at start.
    engine = FakeEngine(adapters={"ad1": module.split("=", 1)[1]})
    async with serve(engine, lora_modules=[module], response_cache="memory") as c:
        yield c


async def answer(client: httpx.AsyncClient, model: str, **fields: Any) -> httpx.Response:
    return await client.post("/v1/chat/completions", json=chat_body(model=model, **fields))


async def test_models_lists_an_adapter_under_its_base_never_its_path(
    client: httpx.AsyncClient,
) -> None:
    listed = {m["id"]: m for m in (await client.get("/v1/models")).json()["data"]}
    assert listed["ad1"]["parent"] == MODEL
    assert listed["ad1"]["root"] == "ad1"
    assert listed[MODEL]["parent"] is None
    one = (await client.get("/v1/models/ad1")).json()
    assert "/" not in one["root"]


async def test_chat_and_completions_route_by_model(client: httpx.AsyncClient) -> None:
    r = await answer(client, "ad1")
    assert r.json()["model"] == "ad1"
    assert r.json()["choices"][0]["message"]["content"] == f"[ad1] {REPLY}"
    base = await answer(client, MODEL)
    assert base.json()["choices"][0]["message"]["content"] == REPLY
    body = {"model": "ad1", "prompt": "Hi", "max_tokens": 3}
    completion = (await client.post("/v1/completions", json=body)).json()
    assert completion["model"] == "ad1"
    assert completion["choices"][0]["text"].startswith("[ad1]")
    unknown = await answer(client, "ad9")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"


async def test_responses_and_their_follow_ups_answer_with_the_adapter(
    client: httpx.AsyncClient,
) -> None:
    first = (await client.post("/v1/responses", json={"model": "ad1", "input": "Hi"})).json()
    assert first["model"] == "ad1"
    assert first["output"][0]["content"][0]["text"].startswith("[ad1]")
    body = {"model": "ad1", "input": "And?", "previous_response_id": first["id"]}
    second = (await client.post("/v1/responses", json=body)).json()
    assert second["output"][0]["content"][0]["text"].startswith("[ad1]")


async def test_the_cache_keeps_each_adapters_answer_apart(client: httpx.AsyncClient) -> None:
    for _ in range(2):  # the second round is answered from the cache
        ad1 = await answer(client, "ad1", temperature=0)
        base = await answer(client, MODEL, temperature=0)
        assert ad1.json()["choices"][0]["message"]["content"] == f"[ad1] {REPLY}"
        assert ad1.json()["model"] == "ad1"
        assert base.json()["choices"][0]["message"]["content"] == REPLY
    streamed = await answer(client, "ad1", temperature=0, stream=True)
    assert '"model":"ad1"' in streamed.text
    assert f'"model":"{MODEL}"' not in streamed.text


async def test_stored_records_and_metrics_name_the_adapter(client: httpx.AsyncClient) -> None:
    """What is kept and counted names the model the client asked for: the adapter."""
    stored = (await answer(client, "ad1", store=True)).json()
    await answer(client, MODEL, store=True)
    kept = (await client.get(f"/v1/chat/completions/{stored['id']}")).json()
    assert kept["model"] == "ad1"
    listed = (await client.get("/v1/chat/completions", params={"model": "ad1"})).json()["data"]
    assert [c["id"] for c in listed] == [stored["id"]]
    response = (await client.post("/v1/responses", json={"model": "ad1", "input": "Hi"})).json()
    assert (await client.get(f"/v1/responses/{response['id']}")).json()["model"] == "ad1"
    text = (await client.get("/metrics")).text
    # Two answers (the chat completion and the response), their tokens counted under ad1.
    assert 'oai_time_to_first_token_seconds_count{model="ad1"} 2.0' in text
    generated = re.search(r'^oai_generation_tokens_total\{model="ad1"\} (\S+)$', text, re.M)
    assert generated is not None
    assert float(generated[1]) > 0
    assert (
        'oai_requests_total{method="POST",model="ad1",'
        'route="/v1/chat/completions",status="200"} 1.0'
    ) in text


async def test_realtime_sessions_answer_with_the_adapter(module: str) -> None:
    engine = FakeEngine(adapters={"ad1": module.split("=", 1)[1]})
    app_settings = {"lora_modules": [module]}
    async with (
        realtime_server(engine, **app_settings) as root,
        client_for(root).realtime.connect(model="ad1") as conn,
    ):
        created = await events_until(conn, "session.created")
        assert created[-1]["session"]["model"] == "ad1"
        await conn.response.create(
            response={"instructions": "Say hi.", "output_modalities": ["text"]}
        )
        await events_until(conn, "response.done")
    assert engine.calls[-1].options.adapter == "ad1"


async def test_an_adapter_of_lora_dir_loads_on_first_use(adapters: Path) -> None:
    engine = FakeEngine()
    async with serve(engine, lora_dir=adapters) as client:
        r = await answer(client, "by-name")
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"].startswith("[by-name]")
        assert engine.adapters == {"by-name": str(adapters / "by-name")}
        ids = [m["id"] for m in (await client.get("/v1/models")).json()["data"]]
        assert "by-name" in ids
        for bad in ("..", "../by-name", ".by-name", "a/b"):
            refused = await answer(client, bad)
            assert refused.status_code == 400, bad
            assert refused.json()["error"]["param"] == "model"
        wide = await answer(client, "wide")
        assert wide.status_code == 400
        assert "--max-lora-rank" in wide.json()["error"]["message"]
        assert (await answer(client, "empty")).status_code == 400
        assert (await answer(client, "missing")).status_code == 404
        assert set(engine.adapters) == {"by-name"}


async def load(client: httpx.AsyncClient, name: str, path: str) -> httpx.Response:
    return await client.post("/v1/load_lora_adapter", json={"lora_name": name, "lora_path": path})


async def test_run_time_load_use_unload(adapters: Path) -> None:
    engine = FakeEngine()
    settings = {"lora_dir": adapters, "allow_runtime_lora": True, "api_key": ["k"]}
    async with serve(engine, **settings) as client:
        assert (await load(client, "rt", "by-name")).status_code == 401
        client.headers["Authorization"] = "Bearer k"
        loaded = await load(client, "rt", "by-name")
        assert loaded.status_code == 200, loaded.text
        assert (
            (await answer(client, "rt"))
            .json()["choices"][0]["message"]["content"]
            .startswith("[rt]")
        )
        clash = await load(client, "rt", str(adapters / "by-name"))
        assert (clash.status_code, clash.json()["error"]["param"]) == (400, "lora_name")
        base = await load(client, MODEL, "by-name")
        assert (base.status_code, base.json()["error"]["param"]) == (400, "lora_name")
        unload = {"lora_name": "rt"}
        assert (await client.post("/v1/unload_lora_adapter", json=unload)).status_code == 200
        gone = await answer(client, "rt")
        assert (gone.status_code, gone.json()["error"]["code"]) == (404, "model_not_found")
        again = await client.post("/v1/unload_lora_adapter", json=unload)
        assert again.status_code == 404
        model = await client.post("/v1/unload_lora_adapter", json={"lora_name": MODEL})
        assert model.status_code == 400
        assert engine.adapters == {}


@pytest.mark.parametrize("path", ["../", "/etc", "empty", "wide", "nowhere", "by-name/../.."])
async def test_run_time_loads_refuse_what_is_not_an_adapter_inside_lora_dir(
    adapters: Path, path: str
) -> None:
    engine = FakeEngine()
    async with serve(engine, lora_dir=adapters, allow_runtime_lora=True) as client:
        refused = await load(client, "x", path)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["param"] == "lora_path"
        assert str(adapters) not in refused.text
        assert engine.adapters == {}


async def test_weights_the_engine_refuses_are_a_400_and_nothing_is_served(adapters: Path) -> None:
    fault = InvalidRequestError("The adapter could not be loaded.", param="lora_path")
    engine = FakeEngine(adapter_fault=fault)
    async with serve(engine, lora_dir=adapters, allow_runtime_lora=True) as client:
        refused = await load(client, "x", "by-name")
        assert (refused.status_code, refused.json()["error"]["param"]) == (400, "lora_path")
        assert (await answer(client, "x")).status_code == 404
        assert (await answer(client, MODEL)).status_code == 200


async def test_the_run_time_endpoints_do_not_exist_unless_allowed(adapters: Path) -> None:
    async with serve(FakeEngine(), lora_dir=adapters) as client:
        assert (await load(client, "x", "by-name")).status_code == 404


def test_an_adapter_named_as_the_model_stops_start_up(module: str) -> None:
    path = module.split("=", 1)[1]
    with pytest.raises(DuplicateModelError):
        create_app(Settings(lora_modules=[f"{MODEL}={path}"]), FakeEngine())


def test_lora_flags_reach_the_engine_as_vllm_names_them(module: str, adapters: Path) -> None:
    settings = CliApp.run(
        Settings,
        cli_args=["--lora-modules", module, "--max-loras", "2", "--max-lora-rank", "8"],
    )
    args = engine_args(settings, on_cpu=False)
    assert (args["enable_lora"], args["max_loras"], args["max_lora_rank"]) == (True, 2, 8)
    # On CPU, vLLM's ops fixed in the engine core (vllm_lora_ops.py): the same slots ...
    fixed = engine_args(settings, on_cpu=True, lora_slot_fix=True)
    assert fixed["max_loras"] == 2
    assert fixed["worker_extension_cls"] == "oai_server.engine.vllm.lora_ops.LoRASlotFix"
    # ... else one slot more for the null adapter of base-model requests.
    assert engine_args(settings, on_cpu=True)["max_loras"] == 3
    assert "worker_extension_cls" not in engine_args(settings, on_cpu=True)
    assert "enable_lora" not in engine_args(Settings(), on_cpu=True)
    assert engine_args(Settings(lora_dir=adapters), on_cpu=True)["enable_lora"] is True
    for bad in ("ad1", "=x", f"ad1={adapters / 'nowhere'}"):
        with pytest.raises(ValueError, match="lora_modules"):
            Settings(lora_modules=[bad])


def test_weights_for_another_base_model_are_refused_before_the_engine(tmp_path: Path) -> None:
    """vLLM copies a narrower matrix into its slot without a word; the header is checked."""
    config = SimpleNamespace(hidden_size=HIDDEN)
    check_shapes(write_adapter(tmp_path / "fits", seed=1), config)
    with pytest.raises(InvalidRequestError, match="another base model"):
        check_shapes(write_adapter(tmp_path / "other", seed=1, hidden=512), config)
    corrupt = write_adapter(tmp_path / "corrupt", seed=1)
    (corrupt / "adapter_model.safetensors").write_bytes(b"\x00" * 64 + b"not safetensors")
    with pytest.raises(InvalidRequestError, match="cannot be read"):
        check_shapes(corrupt, config)
