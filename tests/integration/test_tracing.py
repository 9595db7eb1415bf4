"""The real engine's timings in a request's trace: vLLM's own request stats (queued,
scheduled, first token) land in the engine span, as an OTLP backend receives it."""

from __future__ import annotations

import pytest

from tests.conformance import validating_client
from tests.integration.conftest import MODEL, Server
from tests.tracing.receiver import Receiver

pytestmark = pytest.mark.integration

TRACE_ID = "d4cda95b652f4a1592b449d5929fda1b"
TRACEPARENT = f"00-{TRACE_ID}-6e0c63257de34c92-01"


def test_the_engine_span_carries_vllms_timings(server: Server, trace_receiver: Receiver) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 8,
        "ignore_eos": True,
    }
    with validating_client(timeout=120) as http:
        response = http.post(
            f"{server.base_url}/chat/completions", json=body, headers={"traceparent": TRACEPARENT}
        )
    assert response.status_code == 200
    answer = response.json()
    # The batch processor exports every 5 s.
    deadline_s = 60.0
    # The receiver is the session server's: other tests' spans are there too.
    trace_receiver.wait_for(1, "decode", timeout_s=deadline_s, trace_id=TRACE_ID)
    trace_receiver.wait_for(1, f"chat {MODEL}", timeout_s=deadline_s, trace_id=TRACE_ID)
    with trace_receiver.lock:
        spans = [s for s in trace_receiver.spans if s.trace_id == TRACE_ID]
    (engine,) = [s for s in spans if s.name == "engine"]
    (server_span,) = [s for s in spans if s.span_id == engine.parent_span_id]
    assert server_span.attributes["gen_ai.response.id"] == answer["id"]
    assert server_span.attributes["gen_ai.usage.output_tokens"] == 8
    a = engine.attributes
    assert a["gen_ai.usage.input_tokens"] == answer["usage"]["prompt_tokens"]
    assert a["gen_ai.usage.output_tokens"] == 8
    # vLLM's per-request stats, not ours: queued -> scheduled -> first token.
    assert a["gen_ai.latency.time_in_queue"] >= 0
    assert a["gen_ai.latency.time_in_model_prefill"] > 0
    assert a["gen_ai.latency.time_to_first_token"] >= a["gen_ai.latency.time_in_model_prefill"]
    assert a["gen_ai.latency.time_in_model_decode"] > 0
    assert "gen_ai.usage.cache_read.input_tokens" in a
    children = {s.name: s for s in spans if s.parent_span_id == engine.span_id}
    assert set(children) == {"queue", "prefill", "decode"}
    prefill = children["prefill"]
    assert prefill.end_ns - prefill.start_ns == pytest.approx(
        a["gen_ai.latency.time_in_model_prefill"] * 1e9, abs=2e6
    )
