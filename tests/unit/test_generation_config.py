"""The model's own sampling defaults (`--generation-config`) on every endpoint.

The fake engine reports the defaults as the vLLM adapter reads them from the model's
`generation_config.json`; what reached the engine is in its record of calls.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_settings import CliApp

from oai_server.engine.fake import FakeEngine
from oai_server.engine.types import SamplingDefaults
from oai_server.engine.vllm.args import engine_args
from oai_server.settings import Settings
from tests.cache.conftest import cached
from tests.cache.conftest import chat_body as greedy_chat_body
from tests.realtime.conftest import MODEL, client_for, events_until, realtime_server
from tests.unit.conftest import chat_body, serve

QWEN_LIKE = SamplingDefaults(
    temperature=0.7, top_p=0.8, top_k=20, min_p=0.05, repetition_penalty=1.05, max_tokens=7
)


def sampled(engine: FakeEngine) -> tuple[float, float, int, float, float, int]:
    o = engine.calls[-1].options
    return (o.temperature, o.top_p, o.top_k, o.min_p, o.repetition_penalty, o.max_tokens)


async def test_fields_left_out_take_the_models_values_on_chat_and_completions() -> None:
    engine = FakeEngine(sampling_defaults=QWEN_LIKE, reply="one two three four five six seven")
    async with serve(engine) as client:
        r = await client.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 200, r.text
        assert sampled(engine) == (0.7, 0.8, 20, 0.05, 1.05, 7)
        r = await client.post("/v1/completions", json={"model": MODEL, "prompt": "Once"})
        assert r.status_code == 200, r.text
        # The completions spec's own max_tokens default (16) is the request's value.
        assert sampled(engine) == (0.7, 0.8, 20, 0.05, 1.05, 16)


async def test_a_field_the_request_sets_wins() -> None:
    engine = FakeEngine(sampling_defaults=QWEN_LIKE)
    body = chat_body(temperature=0, top_p=1, top_k=-1, min_p=0, repetition_penalty=1, max_tokens=30)
    async with serve(engine) as client:
        r = await client.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
    assert sampled(engine) == (0.0, 1.0, -1, 0.0, 1.0, 30)


async def test_without_model_defaults_openai_defaults_apply() -> None:
    engine = FakeEngine(max_model_len=100)
    async with serve(engine) as client:
        r = await client.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 200, r.text
    temperature, top_p, top_k, min_p, repetition, max_tokens = sampled(engine)
    assert (temperature, top_p, top_k, min_p, repetition) == (1.0, 1.0, 0, 0.0, 1.0)
    # No max_new_tokens in the config: all the room the context has left.
    assert max_tokens == 100 - len(engine.calls[-1].prompt_token_ids)


async def test_the_models_max_tokens_never_exceeds_the_room_left() -> None:
    engine = FakeEngine(max_model_len=40, sampling_defaults=SamplingDefaults(max_tokens=1000))
    async with serve(engine) as client:
        r = await client.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 200, r.text
    assert sampled(engine)[-1] == 40 - len(engine.calls[-1].prompt_token_ids)


async def test_responses_sample_and_echo_the_models_values() -> None:
    engine = FakeEngine(sampling_defaults=QWEN_LIKE)
    async with serve(engine) as client:
        r = await client.post("/v1/responses", json={"model": MODEL, "input": "Hi", "store": False})
        assert r.status_code == 200, r.text
    assert sampled(engine)[:2] == (0.7, 0.8)
    assert (r.json()["temperature"], r.json()["top_p"]) == (0.7, 0.8)


async def test_realtime_which_has_no_temperature_samples_with_the_models() -> None:
    engine = FakeEngine(sampling_defaults=QWEN_LIKE)
    async with (
        realtime_server(engine) as root,
        client_for(root).realtime.connect(model=MODEL) as conn,
    ):
        await events_until(conn, "session.created")
        await conn.response.create(
            response={"input": [], "instructions": "Say hi.", "output_modalities": ["text"]}
        )
        await events_until(conn, "response.done")
    assert sampled(engine)[:5] == (0.7, 0.8, 20, 0.05, 1.05)


async def test_a_model_that_defaults_to_greedy_makes_requests_cacheable() -> None:
    """The cache keys on the resolved values: temperature 0 from the model is determined,
    and a request that names the model's own value shares the entry."""
    engine = FakeEngine(sampling_defaults=SamplingDefaults(temperature=0.0))
    async with cached(engine, "memory") as app:
        body = greedy_chat_body()
        del body["temperature"]
        await app.post("/v1/chat/completions", body)
        second = await app.post("/v1/chat/completions", {**body, "temperature": 0})
        assert second.headers["x-cache"] == "hit"
        third = await app.post("/v1/chat/completions", {**body, "temperature": 0.5, "seed": 1})
        assert third.headers["x-cache"] == "miss"
    assert len(engine.calls) == 2


def test_flags_take_vllm_serves_names_and_shapes(tmp_path: Path) -> None:
    settings = CliApp.run(
        Settings,
        cli_args=[
            "--generation-config",
            str(tmp_path),
            "--override-generation-config",
            '{"temperature": 0.5, "max_new_tokens": 64}',
        ],
    )
    args = engine_args(settings, on_cpu=True)
    assert args["generation_config"] == str(tmp_path)
    assert args["override_generation_config"] == {"temperature": 0.5, "max_new_tokens": 64}
    assert engine_args(Settings(), on_cpu=True)["generation_config"] == "auto"
    assert "override_generation_config" not in engine_args(Settings(), on_cpu=True)


@pytest.mark.parametrize(
    ("field", "value"),
    [("generation_config", "/nonexistent/generation"), ("override_generation_config", "{oops")],
)
def test_a_bad_generation_config_is_refused_at_start(field: str, value: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: value})


def test_defaults_are_read_from_vllms_mapping() -> None:
    """vLLM's `get_diff_sampling_param()` also holds fields OpenAI requests carry anyway."""
    read = SamplingDefaults.of({"temperature": 0.2, "top_p": 0.9, "presence_penalty": 0.1})
    assert read == SamplingDefaults(temperature=0.2, top_p=0.9)
    assert read.described() == "temperature=0.2, top_p=0.9"
