"""Request ids, the access log, metrics by route, CORS, trailing slashes, capacity answers."""

from __future__ import annotations

import logging
import re

import pytest

from oai_server.engine.fake import FakeEngine
from oai_server.errors import EngineOverloadedError
from tests.conformance import async_validating_client
from tests.live import serve_async
from tests.production.conftest import chat_body, make_app, new_key

CHAT = "/v1/chat/completions"


async def test_every_response_carries_a_request_id(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="oai_server.access")
    key = new_key()
    engine = FakeEngine()
    app = make_app(engine, api_key=[key])
    auth = {"authorization": f"Bearer {key}"}
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:
        mine = await http.post(CHAT, json=chat_body(), headers={**auth, "x-request-id": "abc-123"})
        assert mine.headers["x-request-id"] == "abc-123"
        usage = mine.json()["usage"]
        # The same id reaches the engine as its request id.
        assert engine.calls[-1].request_id.endswith("abc-123")
        new = await http.post(CHAT, json=chat_body(stream=True), headers=auth)
        assert re.fullmatch(r"[0-9a-f]{32}", new.headers["x-request-id"])
        for response in (await http.get("/health"), await http.post(CHAT, json={})):
            assert response.headers["x-request-id"]
        odd = await http.get("/health", headers={"x-request-id": "x" * 500})
        assert odd.headers["x-request-id"] != "x" * 500

    lines = [r.getMessage() for r in caplog.records if r.name == "oai_server.access"]
    line = next(m for m in lines if "request_id=abc-123" in m)
    assert f"key={key_id_of(key)}" in line
    assert '"POST /v1/chat/completions" status=200' in line
    counts = (
        f"prompt_tokens={usage['prompt_tokens']} completion_tokens={usage['completion_tokens']}"
    )
    assert f"{counts} finish_reason=stop" in line
    assert "duration_ms=" in line
    assert "Hi" not in line  # no text
    assert key not in "\n".join(lines)  # no key


def key_id_of(key: str) -> str:
    from tests.keys import served_key_id

    return served_key_id(key)


async def test_prompt_text_only_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="oai_server.access")
    async with serve_async(make_app()) as root, async_validating_client(base_url=root) as http:
        await http.post(CHAT, json=chat_body(messages=[{"role": "user", "content": "secret"}]))
    assert "secret" not in caplog.text
    caplog.clear()
    async with (
        serve_async(make_app(log_request_text=True)) as root,
        async_validating_client() as http,
    ):
        await http.post(root + CHAT, json=chat_body(messages=[{"role": "user", "content": "hum"}]))
    assert "prompt='<|user|>hum\\n<|assistant|>'" in caplog.text
    caplog.clear()
    # --max-log-len: the line shows the prompt's first characters only, as vLLM's log.
    app = make_app(log_request_text=True, max_log_len=9)
    async with serve_async(app) as root, async_validating_client() as http:
        await http.post(root + CHAT, json=chat_body(messages=[{"role": "user", "content": "hum"}]))
    assert "prompt='<|user|>h'" in caplog.text


async def test_metrics_by_matched_route_and_engine_metrics() -> None:
    engine = FakeEngine(prefill_delay=0.02, token_delay=0.005)
    async with (
        serve_async(make_app(engine)) as root,
        async_validating_client(base_url=root) as http,
    ):
        await http.post(CHAT, json=chat_body())
        await http.get("/v1/models/smollm2-135m-instruct")
        await http.get("/v1/models/other")
        await http.get("/nowhere")
        text = (await http.get("/metrics")).text
    expected = [
        # `model`: the model the request resolved to; none for one that named none.
        'oai_requests_total{method="POST",model="smollm2-135m-instruct",'
        'route="/v1/chat/completions",status="200"} 1.0',
        'oai_requests_total{method="GET",model="",'
        'route="/v1/models/{model:path}",status="200"} 1.0',
        'oai_requests_total{method="GET",model="",'
        'route="/v1/models/{model:path}",status="404"} 1.0',
        'oai_requests_total{method="GET",model="",route="unmatched",status="404"} 1.0',
        'oai_time_to_first_token_seconds_count{model="smollm2-135m-instruct"} 1.0',
        'oai_inter_token_latency_seconds_count{model="smollm2-135m-instruct"} 6.0',
        'oai_e2e_request_latency_seconds_count{model="smollm2-135m-instruct"} 1.0',
        'oai_request_queue_time_seconds_count{model="smollm2-135m-instruct"} 1.0',
        'oai_generation_tokens_total{model="smollm2-135m-instruct"} 7.0',
        'oai_request_finished_total{finish_reason="stop",model="smollm2-135m-instruct"} 1.0',
        "oai_engine_running_requests 0.0",
        "oai_engine_waiting_requests 0.0",
        'oai_prompt_tokens_total{model="smollm2-135m-instruct"} ',
        "oai_request_duration_seconds_bucket",
    ]
    for line in expected:
        assert line in text, line


async def test_cors_is_off_unless_origins_are_set() -> None:
    preflight = {
        "origin": "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type",
    }
    async with serve_async(make_app()) as root, async_validating_client(base_url=root) as http:
        off = await http.options(CHAT, headers=preflight)
        assert "access-control-allow-origin" not in off.headers
    app = make_app(cors_allow_origins="https://app.example")
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:
        on = await http.options(CHAT, headers=preflight)
        assert on.status_code == 200
        assert on.headers["access-control-allow-origin"] == "https://app.example"
        other = await http.options(CHAT, headers={**preflight, "origin": "https://evil.example"})
        assert other.status_code == 400
        answer = await http.post(CHAT, json=chat_body(), headers={"origin": "https://app.example"})
        assert answer.headers["access-control-allow-origin"] == "https://app.example"
        assert "x-request-id" in answer.headers["access-control-expose-headers"]


async def test_trailing_slash_answers_the_route() -> None:
    async with serve_async(make_app()) as root, async_validating_client(base_url=root) as http:
        slashed = await http.post(CHAT + "/", json=chat_body())
        assert slashed.status_code == 200
        assert slashed.json()["object"] == "chat.completion"
        assert (await http.get("/v1/models/")).status_code == 200
        missing = await http.post("/v1/nothing/", json={})
        assert missing.status_code == 404
        assert missing.json()["error"]["type"] == "invalid_request_error"


async def test_queue_limits_answer_503_with_retry_after() -> None:
    engine = FakeEngine(fail_at_step=0, fault=EngineOverloadedError("The engine queue is full."))
    async with (
        serve_async(make_app(engine)) as root,
        async_validating_client(base_url=root) as http,
    ):
        busy = await http.post(CHAT, json=chat_body())
        assert busy.status_code == 503
        assert busy.json()["error"]["code"] == "server_overloaded"
        assert busy.headers["retry-after"] == "1"


async def test_priority_reaches_the_engine() -> None:
    engine = FakeEngine(scheduling_policy="priority")
    async with (
        serve_async(make_app(engine)) as root,
        async_validating_client(base_url=root) as http,
    ):
        assert (await http.post(CHAT, json=chat_body(priority=-5))).status_code == 200
        assert (await http.post("/v1/completions", json={**chat_body(), "prompt": "x"})).is_success
        bad = await http.post(CHAT, json=chat_body(priority=2**40))
        assert bad.status_code == 400
        assert bad.json()["error"]["param"] == "priority"
    assert [c.options.priority for c in engine.calls] == [-5, 0]


async def test_priority_without_priority_scheduling_is_refused_as_by_vllm() -> None:
    # The fake asks the same rule as the vLLM adapter (engine.protocol.check_priority).
    engine = FakeEngine()
    async with (
        serve_async(make_app(engine)) as root,
        async_validating_client(base_url=root) as http,
    ):
        for stream in (False, True):
            refused = await http.post(CHAT, json=chat_body(priority=1, stream=stream))
            assert refused.status_code == 400
            assert refused.json()["error"]["param"] == "priority"
            assert "--scheduling-policy priority" in refused.json()["error"]["message"]
        assert (await http.post(CHAT, json=chat_body(priority=0))).status_code == 200
    assert [c.options.priority for c in engine.calls] == [0]


async def test_probes_and_scrapes_stay_out_of_the_access_log_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="oai_server.access")
    async with (
        serve_async(make_app(FakeEngine())) as root,
        async_validating_client(base_url=root) as http,
    ):
        for path in ("/health", "/metrics", "/version"):
            assert (await http.get(path)).status_code == 200
        assert (await http.get("/v1/models")).status_code == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "oai_server.access"]
    assert len(lines) == 1
    assert '"GET /v1/models" status=200' in lines[0]
