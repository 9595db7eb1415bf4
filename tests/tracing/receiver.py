"""A real OTLP/HTTP trace receiver for the tests: the exporter's protobuf, decoded with
`opentelemetry-proto` (the collector binary is not installable here)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int  # the protobuf's: 1 internal, 2 server, 3 client
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    links: list[tuple[str, str]]  # (trace id, span id)
    status_code: int  # 0 unset, 1 ok, 2 error
    service: str
    headers: dict[str, str] = field(default_factory=dict)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class Receiver:
    """Spans received, in arrival order; `headers` of the last export request."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.headers: dict[str, str] = {}
        self.lock = threading.Lock()
        self.endpoint = ""

    def add(self, body: bytes, headers: dict[str, str]) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            self.headers = headers
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for s in scope_spans.spans:
                        self.spans.append(
                            ReceivedSpan(
                                name=s.name,
                                trace_id=s.trace_id.hex(),
                                span_id=s.span_id.hex(),
                                parent_span_id=s.parent_span_id.hex(),
                                kind=s.kind,
                                start_ns=s.start_time_unix_nano,
                                end_ns=s.end_time_unix_nano,
                                attributes={a.key: _value(a.value) for a in s.attributes},
                                links=[(k.trace_id.hex(), k.span_id.hex()) for k in s.links],
                                status_code=s.status.code,
                                service=str(resource.get("service.name", "")),
                            )
                        )

    def wait_for(
        self,
        count: int,
        name: str | None = None,
        timeout_s: float = 20.0,
        trace_id: str | None = None,
    ) -> None:
        """Until `count` spans (named `name`, of the trace `trace_id`, if given) have arrived."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                found = [
                    s
                    for s in self.spans
                    if (name is None or s.name == name)
                    and (trace_id is None or s.trace_id == trace_id)
                ]
                if len(found) >= count:
                    return
            time.sleep(0.05)
        raise AssertionError(f"{count} spans {name or ''} not received: {self.names()}")

    def names(self) -> list[str]:
        with self.lock:
            return [s.name for s in self.spans]

    def named(self, name: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.name == name]

    def children(self, parent: ReceivedSpan) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.parent_span_id == parent.span_id]


@contextlib.contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP receiver on a free port: `Receiver.endpoint` is its `/v1/traces` URL."""
    received = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            received.add(body, {k.lower(): v for k, v in self.headers.items()})
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received.endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def otlp_grpc_receiver() -> Iterator[Receiver]:
    """An OTLP/gRPC receiver (the exporters' default protocol) on a free port:
    `Receiver.endpoint` is its `http://` address."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    received = Receiver()

    class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(  # noqa: N802 - the protocol's name
            self, request: ExportTraceServiceRequest, context: grpc.ServicerContext
        ) -> ExportTraceServiceResponse:
            metadata = {k: str(v) for k, v in context.invocation_metadata()}
            received.add(request.SerializeToString(), metadata)
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    received.endpoint = f"http://127.0.0.1:{port}"
    try:
        yield received
    finally:
        server.stop(grace=None)
