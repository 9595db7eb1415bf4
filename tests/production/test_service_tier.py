"""OpenAI's `service_tier`: the engine priority each tier runs at, the tier echoed, and
which keys may ask for `priority`.

The fake engine records each call's priority and refuses one under `fcfs` as vLLM does;
that `priority` really overtakes `default` on the real engine is
tests/integration/test_scheduling.py.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from oai_server.engine.fake import FakeEngine
from oai_server.generation.service_tier import FLEX_PRIORITY, PRIORITY_TIER
from tests.conformance import async_validating_client
from tests.keys import served_key_id
from tests.live import serve_async
from tests.production.conftest import MODEL, chat_body, make_app, new_key

CHAT = "/v1/chat/completions"


def _priority_app(engine: FakeEngine, **settings: Any) -> Any:
    return make_app(engine, scheduling_policy="priority", **settings)


def _chunks(response: httpx.Response) -> list[dict[str, Any]]:
    lines = response.text.splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


async def test_each_tier_runs_at_its_engine_priority_and_is_echoed() -> None:
    engine = FakeEngine(scheduling_policy="priority")
    async with (
        serve_async(_priority_app(engine)) as root,
        async_validating_client(base_url=root) as http,
    ):
        echoed = []
        for tier in ("priority", "fast", "auto", "default", "scale", "flex"):
            answer = await http.post(CHAT, json=chat_body(service_tier=tier, max_tokens=3))
            assert answer.status_code == 200, answer.text
            echoed.append(answer.json()["service_tier"])
        plain = await http.post(CHAT, json=chat_body(max_tokens=3))
        assert "service_tier" not in plain.json()  # echoed only when asked, as OpenAI
        # vLLM's own field still wins over the tier.
        own = await http.post(CHAT, json=chat_body(service_tier="flex", priority=3))
        assert own.status_code == 200
    assert echoed == ["priority", "priority", "default", "default", "default", "flex"]
    priorities = [call.options.priority for call in engine.calls]
    assert priorities == [PRIORITY_TIER, PRIORITY_TIER, 0, 0, 0, FLEX_PRIORITY, 0, 3]


async def test_every_stream_chunk_and_the_other_endpoints_carry_the_tier() -> None:
    engine = FakeEngine(scheduling_policy="priority")
    async with (
        serve_async(_priority_app(engine)) as root,
        async_validating_client(base_url=root) as http,
    ):
        body = chat_body(service_tier="flex", stream=True, stream_options={"include_usage": True})
        streamed = await http.post(CHAT, json=body)
        chunks = _chunks(streamed)
        assert len(chunks) > 2
        assert {chunk["service_tier"] for chunk in chunks} == {"flex"}
        completion = {"model": MODEL, "prompt": "x", "max_tokens": 2, "service_tier": "priority"}
        assert (await http.post("/v1/completions", json=completion)).status_code == 200
        response = {"model": MODEL, "input": "Hi", "store": False, "service_tier": "priority"}
        answered = await http.post("/v1/responses", json=response)
        assert answered.json()["service_tier"] == "priority"
    assert [call.options.priority for call in engine.calls] == [FLEX_PRIORITY] + [PRIORITY_TIER] * 2


async def test_under_fcfs_every_tier_is_served_and_echoed_as_default() -> None:
    engine = FakeEngine()  # fcfs: vLLM refuses any priority but 0
    async with (
        serve_async(make_app(engine)) as root,
        async_validating_client(base_url=root) as http,
    ):
        for tier in ("priority", "flex"):
            answer = await http.post(CHAT, json=chat_body(service_tier=tier))
            assert answer.status_code == 200, answer.text
            assert answer.json()["service_tier"] == "default"
    assert [call.options.priority for call in engine.calls] == [0, 0]


async def test_only_the_named_keys_may_jump_the_queue() -> None:
    allowed, other = new_key(), new_key()
    engine = FakeEngine(scheduling_policy="priority")
    app = _priority_app(
        engine, api_key=[allowed, other], service_tier_priority_keys=[served_key_id(allowed)]
    )
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:

        async def ask(key: str, **body: Any) -> httpx.Response:
            return await http.post(
                CHAT, json=chat_body(**body), headers={"authorization": f"Bearer {key}"}
            )

        assert (await ask(allowed, service_tier="priority")).json()["service_tier"] == "priority"
        assert (await ask(other, service_tier="priority")).json()["service_tier"] == "default"
        assert (await ask(other, service_tier="flex")).json()["service_tier"] == "flex"
        refused = await ask(other, priority=-1)
        assert refused.status_code == 400
        assert refused.json()["error"]["param"] == "priority"
        assert (await ask(allowed, priority=-1)).status_code == 200
    assert [call.options.priority for call in engine.calls] == [
        PRIORITY_TIER,
        0,
        FLEX_PRIORITY,
        -1,
    ]


async def test_an_unknown_tier_is_a_400() -> None:
    async with (
        serve_async(make_app(FakeEngine())) as root,
        async_validating_client(base_url=root) as http,
    ):
        for path, body in (
            (CHAT, chat_body(service_tier="turbo")),
            ("/v1/responses", {"model": MODEL, "input": "Hi", "service_tier": "turbo"}),
        ):
            refused = await http.post(path, json=body)
            assert refused.status_code == 400
            assert refused.json()["error"]["param"] == "service_tier"
