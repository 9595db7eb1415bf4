"""Several chat models in one server, each on its own (fake) engine: a request goes to the
engine its `model` names, with that model's tokenizer, template and context; the rest
(`/v1/models`, `/health`, metrics, unknown names) sees every model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine, FakeTokenizer
from oai_server.engine.router import EngineRouter, stop_all
from oai_server.errors import OpenAIError
from oai_server.settings import Settings
from oai_server.state import ServerState
from tests.conformance import AsyncValidatingTransport

# The second model's own template: a system line the first model's never writes.
SECOND_TEMPLATE = (
    "<|system|>You are B.\n{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}"
)


@pytest.fixture
def engines() -> dict[str, FakeEngine]:
    return {
        "first": FakeEngine(reply="I am the first model.", max_model_len=2048),
        "second": FakeEngine(
            reply="I am the second model.", max_model_len=512, chat_template=SECOND_TEMPLATE
        ),
    }


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store (responses, batches) in this test's own directory."""
    monkeypatch.setenv("OAI_DATA_DIR", str(tmp_path / "data"))


@asynccontextmanager
async def serve(
    engines: dict[str, FakeEngine], **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_app(engines, **settings) as (client, _):
        yield client


@asynccontextmanager
async def serve_app(
    engines: dict[str, FakeEngine], **settings: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, ServerState]]:
    router = EngineRouter(engines)
    models = [f"{name}=org/{name}" for name in engines]
    app = create_app(Settings(model=models, embedding_model="none", **settings), router)
    async with app.router.lifespan_context(app):
        for _ in range(100):
            try:
                await router.check_health()
                break
            except OpenAIError:
                await asyncio.sleep(0.01)
        transport = AsyncValidatingTransport(transport=httpx.ASGITransport(app=app))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client, app.state.server


def _chat(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "Who are you?"}], **extra}


def _prompt(engine: FakeEngine, call: int) -> str:
    return FakeTokenizer().decode(engine.calls[call].prompt_token_ids)


async def test_each_request_goes_to_the_engine_its_model_names(
    engines: dict[str, FakeEngine],
) -> None:
    async with serve(engines) as client:
        answers = await asyncio.gather(
            *(
                client.post("/v1/chat/completions", json=_chat(model))
                for model in ["first", "second"] * 4
            )
        )
        completion = await client.post(
            "/v1/completions", json={"model": "second", "prompt": "Hi", "max_tokens": 5}
        )
        response = await client.post("/v1/responses", json={"model": "first", "input": "Hi"})
    for answer, model in zip(answers, ["first", "second"] * 4, strict=True):
        body = answer.json()
        assert body["model"] == model
        assert body["choices"][0]["message"]["content"] == f"I am the {model} model."
    assert completion.json()["choices"][0]["text"] == "I am the second model."
    assert response.json()["output"][0]["content"][0]["text"] == "I am the first model."
    assert [len(engines["first"].calls), len(engines["second"].calls)] == [5, 5]
    # Each model's own chat template renders its prompts.
    assert _prompt(engines["second"], 0) == "<|system|>You are B.\n[user] Who are you?\n[assistant]"
    assert _prompt(engines["first"], 0) == "<|user|>Who are you?\n<|assistant|>"


async def test_each_model_has_its_own_context_and_tokenizer(
    engines: dict[str, FakeEngine],
) -> None:
    long = "x" * 600  # within the first model's 2048 tokens, over the second's 512
    async with serve(engines) as client:
        fits = await client.post("/v1/chat/completions", json=_chat("first", max_tokens=10) | {
            "messages": [{"role": "user", "content": long}]})  # fmt: skip
        over = await client.post("/v1/chat/completions", json=_chat("second", max_tokens=10) | {
            "messages": [{"role": "user", "content": long}]})  # fmt: skip
        tokenized = await client.post(
            "/tokenize", json={"model": "second", "messages": [{"role": "user", "content": "Hi"}]}
        )
        listed = (await client.get("/v1/models")).json()["data"]
    assert fits.status_code == 200
    assert over.status_code == 400
    assert "512" in over.json()["error"]["message"]
    body = tokenized.json()
    assert body["max_model_len"] == 512
    assert FakeTokenizer().decode(body["tokens"]).startswith("<|system|>You are B.")
    assert [(m["id"], m["root"], m["max_model_len"]) for m in listed] == [
        ("first", "org/first", 2048),
        ("second", "org/second", 512),
    ]


async def test_an_unknown_model_is_a_404_naming_it_and_the_served_ones(
    engines: dict[str, FakeEngine],
) -> None:
    async with serve(engines) as client:
        answer = await client.post("/v1/chat/completions", json=_chat("third"))
    error = answer.json()["error"]
    assert answer.status_code == 404
    assert error["code"] == "model_not_found"
    assert "'third'" in error["message"]
    assert "'first', 'second'" in error["message"]
    assert not engines["first"].calls
    assert not engines["second"].calls


async def test_health_is_503_when_one_model_cannot_serve_and_only_its_requests_fail(
    engines: dict[str, FakeEngine],
) -> None:
    async with serve(engines, drain_timeout=5) as client:
        assert (await client.get("/health")).status_code == 200
        engines["second"].kill()
        health = await client.get("/health")
        dead = await client.post("/v1/chat/completions", json=_chat("second"))
        alive = await client.post("/v1/chat/completions", json=_chat("first"))
    assert health.status_code == 503
    assert "'second'" in health.json()["error"]["message"]
    assert dead.status_code == 503
    assert alive.status_code == 200


async def test_one_model_dying_ends_the_process_once_the_others_requests_finish(
    engines: dict[str, FakeEngine],
) -> None:
    engines["first"].token_delay = 0.3  # its 5 tokens outlast the 1 s a lone dead engine gets
    started = asyncio.Event()

    def reply(prompt: str) -> str:
        started.set()  # the request has reached the first model's engine
        return "I am the first model."

    engines["first"].reply_for = reply
    exited = asyncio.Event()
    async with serve_app(engines, drain_timeout=5) as (client, state):
        state.lifecycle.request_exit = exited.set
        slow = asyncio.ensure_future(client.post("/v1/chat/completions", json=_chat("first")))
        await asyncio.wait_for(started.wait(), 5)
        engines["second"].kill()
        await asyncio.wait_for(exited.wait(), 5)
        assert slow.done()
        answer = await slow
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "I am the first model."
    assert state.lifecycle.exit_code == 3


async def test_metrics_carry_the_model_each_request_resolved_to(
    engines: dict[str, FakeEngine], tmp_path: Path
) -> None:
    adapter = tmp_path / "support"
    adapter.mkdir()
    engines["first"].adapters["support"] = str(adapter)
    async with serve(engines, lora_modules=[f"support={adapter}"]) as client:
        for model in ("first", "second", "second", "support"):
            answer = await client.post("/v1/chat/completions", json=_chat(model))
            assert answer.status_code == 200, answer.text
        await client.post("/v1/chat/completions", json=_chat("unknown"))
        text = (await client.get("/metrics")).text
    for model, requests in (("first", 1), ("second", 2), ("support", 1)):
        assert f'oai_time_to_first_token_seconds_count{{model="{model}"}} {requests}.0' in text
        assert (
            f'oai_requests_total{{method="POST",model="{model}",'
            f'route="/v1/chat/completions",status="200"}} {requests}.0'
        ) in text
    # A name no model has never becomes a label value.
    assert 'model="unknown"' not in text
    # The adapter is the first model's: its request went to that engine.
    assert engines["first"].calls[-1].options.adapter == "support"


async def test_batch_lines_route_by_model(engines: dict[str, FakeEngine]) -> None:
    line = {
        "custom_id": "one",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": _chat("second", max_tokens=8),
    }
    async with serve(engines) as client:
        uploaded = await client.post(
            "/v1/files",
            files={"file": ("in.jsonl", json.dumps(line).encode(), "application/jsonl")},
            data={"purpose": "batch"},
        )
        batch = await client.post(
            "/v1/batches",
            json={
                "input_file_id": uploaded.json()["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            },
        )
        for _ in range(200):
            status = (await client.get(f"/v1/batches/{batch.json()['id']}")).json()
            if status["status"] == "completed":
                break
            await asyncio.sleep(0.05)
        output = await client.get(f"/v1/files/{status['output_file_id']}/content")
    answer = json.loads(output.text.splitlines()[0])["response"]["body"]
    assert answer["model"] == "second"
    assert answer["choices"][0]["message"]["content"] == "I am the second model."


async def test_a_cached_answer_is_counted_under_its_model(engines: dict[str, FakeEngine]) -> None:
    async with serve(engines, response_cache="memory") as client:
        for _ in range(2):
            answer = await client.post("/v1/chat/completions", json=_chat("second", temperature=0))
            assert answer.status_code == 200
        assert answer.headers["x-cache"] == "hit"
        text = (await client.get("/metrics")).text
    assert 'oai_time_to_first_token_seconds_count{model="second"} 1.0' in text
    assert (
        'oai_requests_total{method="POST",model="second",'
        'route="/v1/chat/completions",status="200"} 2.0'
    ) in text


class _Stopping:
    """An engine whose stop waits for `waits_for`'s stop to end, or else raises."""

    def __init__(self, waits_for: _Stopping | None = None) -> None:
        self.waits_for, self.done = waits_for, asyncio.Event()

    @property
    def stopped(self) -> bool:
        return self.done.is_set()

    async def stop(self) -> None:
        if self.waits_for is not None:
            await asyncio.wait_for(self.waits_for.done.wait(), 5)
        self.done.set()
        if self.waits_for is None:
            raise RuntimeError("the engine core would not stop")


async def test_engines_stop_at_once_and_each_whatever_another_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The first waits for the second's stop: stopped one after the other, it would time out.
    second = _Stopping()
    first = _Stopping(waits_for=second)
    await stop_all({"first": first, "second": second})
    assert (first.stopped, second.stopped) == (True, True)
    failures = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in failures] == ["stopping the engine of 'second' failed"]


async def test_a_models_file_entry_takes_its_own_tool_call_parser(
    engines: dict[str, FakeEngine], tmp_path: Path
) -> None:
    """`second` is served with `tool_call_parser: none`, `first` with the server's `auto`."""
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n"
        "  - {name: first, model: org/first}\n"
        "  - {name: second, model: org/second, tool_call_parser: none}\n"
    )
    router = EngineRouter(engines)
    app = create_app(Settings(models_file=models), router)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    async with app.router.lifespan_context(app):
        transport = AsyncValidatingTransport(transport=httpx.ASGITransport(app=app))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            first = await client.post("/v1/chat/completions", json=_chat("first", tools=tools))
            second = await client.post("/v1/chat/completions", json=_chat("second", tools=tools))
    assert first.status_code == 200, first.text
    assert second.status_code == 400, second.text
    assert second.json()["error"]["param"] == "tool_choice"
    assert "--tool-call-parser none" in second.json()["error"]["message"]
