"""One trace across Ray Serve's processes: the gateway's span continues the client's, and
the replica's server span (and its engine span) continues the gateway's.

The replicas and the gateway export over OTLP/gRPC (the default protocol: the session's
Ray was started before any OTEL_* variable could be set for it) to a receiver here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance import checked_post
from tests.ray.conftest import FAKE, MODEL, RayServe, deployed
from tests.tracing.receiver import Receiver, otlp_grpc_receiver

APP = "tracing"
TRACE_ID = "5b8efff798038103d269b633813fc60c"
CLIENT_SPAN = "eee19b7ec3c1b174"
SERVER = 2


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with otlp_grpc_receiver() as received:
        yield received


@pytest.fixture(scope="module")
def url(ray_serve: RayServe, receiver: Receiver) -> Iterator[str]:
    settings = {
        "ray_router": "affinity",  # the gateway in front of the replica
        "ray_num_cpus": 0.5,
        "otlp_traces_endpoint": receiver.endpoint,
    }
    with deployed(APP, engine_factory=FAKE, **settings):
        yield ray_serve.url


def test_a_request_through_the_gateway_is_one_trace(url: str, receiver: Receiver) -> None:
    response = checked_post(
        f"{url}/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3},
        headers={"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"},
        timeout=60,
    )
    assert response.status_code == 200
    # Each process exports on its batch processor's schedule (5 s by default).
    receiver.wait_for(1, "POST /v1/chat/completions", timeout_s=60)  # the gateway's
    receiver.wait_for(1, f"chat {MODEL}", timeout_s=60)  # the replica's
    receiver.wait_for(1, "engine", timeout_s=60)
    servers = [s for s in receiver.spans if s.kind == SERVER and s.trace_id == TRACE_ID]
    (gateway,) = [s for s in servers if s.attributes.get("oai.hop") == "gateway"]
    (replica,) = [s for s in servers if s is not gateway]
    assert gateway.parent_span_id == CLIENT_SPAN
    assert gateway.attributes["oai.replica"] == response.headers["x-replica"]
    assert replica.parent_span_id == gateway.span_id
    assert replica.attributes["gen_ai.response.id"] == response.json()["id"]
    (engine,) = [s for s in receiver.children(replica) if s.name == "engine"]
    assert engine.trace_id == TRACE_ID
    assert engine.attributes["gen_ai.usage.output_tokens"] == 3
