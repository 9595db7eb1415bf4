"""Each request's trace, as an OTLP backend receives it: the server span, continued from
the client's `traceparent`, with GenAI's attributes, and the spans of what it waited on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from oai_server.app import create_app
from oai_server.auth import key_id
from oai_server.engine.fake import FakeEngine
from oai_server.secret import ServerSecret
from oai_server.settings import Settings
from tests.live import serve_async
from tests.tracing.conftest import traced
from tests.tracing.receiver import ReceivedSpan, Receiver, otlp_grpc_receiver
from tests.unit.conftest import MODEL, chat_body, serve

KEY = "sk-tracing-test"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
SERVER = 2  # the protobuf's SPAN_KIND_SERVER
SECRET = "the-secret-prompt-text"


def server_span(receiver: Receiver) -> ReceivedSpan:
    (span,) = [s for s in receiver.spans if s.kind == SERVER]
    return span


async def test_a_chat_continues_the_clients_trace_with_genai_attributes(
    receiver: Receiver, tmp_path: Path
) -> None:
    settings = {
        "api_key": [KEY],
        "rate_limit_rpm": 1000,
        "data_dir": tmp_path,
    }
    async with traced(receiver, **settings) as client:
        response = await client.post(
            "/v1/chat/completions",
            json=chat_body(
                max_tokens=5, temperature=0.5, top_p=0.9, seed=7, store=True, ignore_eos=True
            ),
            headers={
                "authorization": f"Bearer {KEY}",
                "traceparent": TRACEPARENT,
                "tracestate": "vendor=value",
            },
        )
        assert response.status_code == 200
        answer = response.json()
    receiver.wait_for(1, "engine")
    server = server_span(receiver)
    # The client's trace, continued: one trace, the server span under the client's span.
    assert server.trace_id == TRACE_ID
    assert server.parent_span_id == CLIENT_SPAN
    assert server.name == f"chat {MODEL}"
    assert server.service == "oai-test"  # OTEL_SERVICE_NAME
    assert receiver.headers.get("x-tenant") == "team-a"  # OTEL_EXPORTER_OTLP_TRACES_HEADERS
    a = server.attributes
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == MODEL
    assert a["gen_ai.response.model"] == answer["model"]
    assert a["gen_ai.response.id"] == answer["id"]
    assert a["gen_ai.response.finish_reasons"] == [answer["choices"][0]["finish_reason"]]
    assert a["gen_ai.usage.input_tokens"] == answer["usage"]["prompt_tokens"]
    assert a["gen_ai.usage.output_tokens"] == answer["usage"]["completion_tokens"] == 5
    assert a["gen_ai.request.temperature"] == 0.5
    assert a["gen_ai.request.top_p"] == 0.9
    assert a["gen_ai.request.seed"] == 7
    assert a["gen_ai.request.max_tokens"] == 5
    assert a["http.response.status_code"] == 200
    assert (a["http.request.method"], a["url.path"]) == ("POST", "/v1/chat/completions")
    assert a["http.route"] == "/v1/chat/completions"
    assert a["oai.request_id"] == response.headers["x-request-id"]
    # The key id under the secret the server kept in its data dir.
    assert a["oai.api_key_id"] == key_id(KEY, ServerSecret.load(None, tmp_path))
    # The key's id, never the key: in no attribute of any span of the trace.
    assert all(KEY not in json.dumps(s.attributes, default=str) for s in receiver.spans)
    # What the request waited on, each a child of the server span, in the same trace.
    children = {s.name: s for s in receiver.children(server)}
    assert {"auth.check_key", "rate_limit.check", "store.write", "engine"} <= set(children)
    engine = children["engine"]
    assert engine.attributes["gen_ai.usage.output_tokens"] == 5
    assert engine.attributes["gen_ai.latency.time_to_first_token"] >= 0
    assert "gen_ai.usage.cache_read.input_tokens" in engine.attributes
    assert {s.name for s in receiver.children(engine)} == {"queue", "prefill", "decode"}
    assert all(s.trace_id == TRACE_ID for s in receiver.spans)
    assert server.start_ns <= engine.start_ns <= engine.end_ns <= server.end_ns


async def test_a_request_without_traceparent_starts_a_trace(receiver: Receiver) -> None:
    async with traced(receiver) as client:
        response = await client.post(
            "/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 2}
        )
        assert response.status_code == 200
    receiver.wait_for(1, "engine")
    server = server_span(receiver)
    assert server.parent_span_id == ""
    assert server.trace_id not in ("", "0" * 32)
    assert server.attributes["gen_ai.operation.name"] == "text_completion"


async def test_a_stream_ends_its_span_when_the_stream_ends(receiver: Receiver) -> None:
    engine = FakeEngine(token_delay=0.02)
    async with traced(receiver, engine) as client:
        async with client.stream(
            "POST",
            "/v1/chat/completions",
            json=chat_body(max_tokens=10, stream=True, ignore_eos=True),
            headers={"traceparent": TRACEPARENT},
        ) as response:
            chunks = [line async for line in response.aiter_lines() if line.startswith("data: ")]
        assert chunks[-1] == "data: [DONE]"
    receiver.wait_for(1, "decode")
    server = server_span(receiver)
    (engine_span,) = receiver.named("engine")
    (decode,) = receiver.named("decode")
    assert server.attributes["gen_ai.usage.output_tokens"] == 10
    assert server.attributes["gen_ai.response.finish_reasons"] == ["length"]
    # Ten tokens 20 ms apart: the spans cover the whole stream, not its first bytes.
    assert decode.end_ns - decode.start_ns >= 0.15e9
    assert server.end_ns >= engine_span.end_ns >= decode.end_ns


async def test_a_cache_hit_has_no_engine_span(receiver: Receiver) -> None:
    body = chat_body(max_tokens=4, temperature=0)
    async with traced(receiver, response_cache="memory") as client:
        first = await client.post("/v1/chat/completions", json=body)
        second = await client.post("/v1/chat/completions", json=body)
        assert first.headers["x-cache"] == "miss"
        assert second.headers["x-cache"] == "hit"
    receiver.wait_for(2, "cache.lookup")
    servers = [s for s in receiver.spans if s.kind == SERVER]
    assert len(servers) == 2
    by_trace = {s.trace_id: s for s in servers}
    miss, hit = (by_trace[s.trace_id] for s in sorted(servers, key=lambda s: s.start_ns))
    hit_children = {s.name for s in receiver.children(hit)}
    miss_children = {s.name for s in receiver.children(miss)}
    assert "engine" not in hit_children
    assert "cache.lookup" in hit_children
    assert {"engine", "cache.lookup", "cache.fill"} <= miss_children
    (lookup,) = [s for s in receiver.children(hit) if s.name == "cache.lookup"]
    assert lookup.attributes["oai.cache.hit"] is True


async def test_no_text_in_spans_unless_log_request_text(receiver: Receiver) -> None:
    body = chat_body(max_tokens=3, messages=[{"role": "user", "content": SECRET}])
    async with traced(receiver) as client:
        assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
    receiver.wait_for(1, "engine")
    assert SECRET not in json.dumps([s.attributes for s in receiver.spans])
    receiver.spans.clear()
    async with traced(receiver, log_request_text=True) as client:
        assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
    receiver.wait_for(1, "engine")
    assert SECRET in server_span(receiver).attributes["gen_ai.prompt"]


async def test_nothing_is_exported_when_tracing_is_off(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The OTEL_* environment points at the receiver, its endpoint included, where an
    # exporter made without --otlp-traces-endpoint would send; without the flag: off.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.removesuffix("/v1/traces"))
    async with serve(FakeEngine()) as client:
        response = await client.post(
            "/v1/chat/completions",
            json=chat_body(max_tokens=2),
            headers={"traceparent": TRACEPARENT},
        )
        assert response.status_code == 200
    async with traced(receiver) as client:  # the receiver does receive, when asked to
        assert (
            await client.post("/v1/chat/completions", json=chat_body(max_tokens=2))
        ).status_code == 200
    receiver.wait_for(1, "engine")
    assert all(s.trace_id != TRACE_ID for s in receiver.spans)
    assert len([s for s in receiver.spans if s.kind == SERVER]) == 1


async def test_grpc_is_the_default_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    with otlp_grpc_receiver() as receiver:
        async with traced(receiver) as client:
            response = await client.post(
                "/v1/chat/completions",
                json=chat_body(max_tokens=2),
                headers={"traceparent": TRACEPARENT},
            )
            assert response.status_code == 200
        receiver.wait_for(1, "engine")
        server = server_span(receiver)
        assert server.trace_id == TRACE_ID
        assert server.service == "oai-server"  # no OTEL_SERVICE_NAME: ours


async def test_an_unknown_protocol_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(ValueError, match="http/json"):
        create_app(Settings(otlp_traces_endpoint="http://127.0.0.1:4318"), FakeEngine())


async def test_a_clients_unsampled_trace_stays_unsampled(receiver: Receiver) -> None:
    """`parentbased_always_on`: a traceparent whose sampled flag is off records nothing,
    and the next request, sampled, is exported (the exporter did run)."""
    async with traced(receiver) as client:
        unsampled = f"00-{TRACE_ID}-{CLIENT_SPAN}-00"
        other_trace = "0af7651916cd43dd8448eb211c80319c"
        for traceparent in (unsampled, f"00-{other_trace}-{CLIENT_SPAN}-01"):
            response = await client.post(
                "/v1/chat/completions",
                json=chat_body(max_tokens=2),
                headers={"traceparent": traceparent},
            )
            assert response.status_code == 200
    receiver.wait_for(1, "engine", trace_id=other_trace)
    assert {s.trace_id for s in receiver.spans} == {other_trace}


async def test_a_rate_limit_refusal_is_recorded_on_its_span(receiver: Receiver) -> None:
    async with traced(receiver, rate_limit_rpm=1) as client:
        statuses = [
            (await client.post("/v1/chat/completions", json=chat_body(max_tokens=2))).status_code
            for _ in range(2)
        ]
    assert statuses == [200, 429]
    receiver.wait_for(2, "rate_limit.check")
    checks = sorted(receiver.named("rate_limit.check"), key=lambda s: s.start_ns)
    assert [s.status_code for s in checks] == [0, 2]  # unset, then error
    refused = next(s for s in receiver.spans if s.span_id == checks[1].parent_span_id)
    assert refused.attributes["http.response.status_code"] == 429


async def test_a_request_waiting_on_the_same_answer_in_flight_has_its_span(
    receiver: Receiver,
) -> None:
    """Two identical deterministic requests at once: the second waits for the first's
    answer (`cache.wait_in_flight`) and has no engine span of its own."""
    body = chat_body(max_tokens=4, temperature=0)
    engine = FakeEngine(token_delay=0.05)
    async with traced(receiver, engine, response_cache="memory") as client:
        first, second = await asyncio.gather(
            client.post("/v1/chat/completions", json=body),
            client.post("/v1/chat/completions", json=body),
        )
    assert sorted([first.headers["x-cache"], second.headers["x-cache"]]) == ["hit", "miss"]
    assert len(engine.calls) == 1
    receiver.wait_for(1, "cache.wait_in_flight")
    (waited,) = receiver.named("cache.wait_in_flight")
    waiter = next(s for s in receiver.spans if s.span_id == waited.parent_span_id)
    assert waiter.kind == SERVER
    assert "engine" not in {s.name for s in receiver.children(waiter)}


async def test_a_streams_spans_end_when_the_client_leaves(receiver: Receiver) -> None:
    """A hundred tokens 20 ms apart, the client gone after three chunks: the request's
    spans end then, while the server runs on, not when the 2 s stream would have."""
    app = create_app(Settings(otlp_traces_endpoint=receiver.endpoint), FakeEngine(token_delay=0.02))
    async with serve_async(app) as base, httpx.AsyncClient(base_url=base) as client:
        body = chat_body(max_tokens=100, stream=True, ignore_eos=True)
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            chunks = 0
            async for line in response.aiter_lines():
                chunks += line.startswith("data: ")
                if chunks == 3:
                    break
        await asyncio.to_thread(receiver.wait_for, 1, "engine", 5.0)
        server = server_span(receiver)
        (engine_span,) = receiver.named("engine")
    assert server.end_ns - server.start_ns < 1e9
    assert engine_span.end_ns - engine_span.start_ns < 1e9


# What `answer` records of a request, whatever its API, and what its engine request adds.
GENAI = (
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "gen_ai.request.temperature",
    "gen_ai.request.top_p",
    "gen_ai.request.max_tokens",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
)


def message_id(response: httpx.Response) -> str:
    """The id of a message, answered whole or streamed (`message_start` carries it)."""
    if not response.headers["content-type"].startswith("text/event-stream"):
        return str(response.json()["id"])
    first = next(line for line in response.text.splitlines() if line.startswith("data: "))
    return str(json.loads(first.removeprefix("data: "))["message"]["id"])


@pytest.mark.parametrize("stream", [False, True])
async def test_a_message_has_the_genai_attributes_of_a_chat(
    receiver: Receiver, stream: bool
) -> None:
    sampling = {"max_tokens": 5, "temperature": 0.5, "top_p": 0.9, "stream": stream}
    async with traced(receiver) as client:
        chat = await client.post("/v1/chat/completions", json=chat_body(**sampling))
        message = await client.post("/v1/messages", json=chat_body(**sampling))
        assert (chat.status_code, message.status_code) == (200, 200)
    receiver.wait_for(2, "engine")
    servers = sorted((s for s in receiver.spans if s.kind == SERVER), key=lambda s: s.start_ns)
    chat_span, message_span = servers
    assert message_span.name == chat_span.name == f"chat {MODEL}"
    assert {name: message_span.attributes.get(name) for name in GENAI} == {
        name: chat_span.attributes[name] for name in GENAI
    }
    assert message_span.attributes["gen_ai.request.temperature"] == 0.5
    assert message_span.attributes["gen_ai.response.id"] == message_id(message)
    engine = next(s for s in receiver.children(message_span) if s.name == "engine")
    assert engine.attributes["gen_ai.request.id"] == message_id(message)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_response_has_the_genai_attributes_of_a_chat(
    receiver: Receiver, stream: bool
) -> None:
    sampling = {"temperature": 0.5, "top_p": 0.9, "stream": stream}
    body = {"model": MODEL, "input": "Hi", "max_output_tokens": 5, "store": False, **sampling}
    async with traced(receiver) as client:
        chat = await client.post("/v1/chat/completions", json=chat_body(max_tokens=5, **sampling))
        response = await client.post("/v1/responses", json=body)
        assert (chat.status_code, response.status_code) == (200, 200)
    receiver.wait_for(2, "engine")
    servers = sorted((s for s in receiver.spans if s.kind == SERVER), key=lambda s: s.start_ns)
    chat_span, response_span = servers
    assert response_span.name == chat_span.name == f"chat {MODEL}"
    assert {name: response_span.attributes.get(name) for name in GENAI} == {
        name: chat_span.attributes[name] for name in GENAI
    }
    if stream:
        last = response.text.strip().splitlines()[-1].removeprefix("data: ")
        response_id = json.loads(last)["response"]["id"]
    else:
        response_id = response.json()["id"]
    assert response_span.attributes["gen_ai.response.id"] == response_id
