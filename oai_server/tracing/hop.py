"""One trace across a hop between processes: the Ray Serve gateway's span of a request,
and the W3C headers that carry it to the replica, whose server span continues it."""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import propagate
from opentelemetry.trace import Span, SpanKind, Tracer, set_span_in_context

from oai_server.tracing.middleware import CARRIED


def start_hop(
    tracer: Tracer, method: str, path: str, headers: Iterable[tuple[bytes, bytes]]
) -> tuple[Span, list[tuple[bytes, bytes]]]:
    """The gateway's span of a request with `headers` (continuing the client's trace), and
    those headers with the client's trace headers replaced by the span's own: what the
    replica gets. The caller ends the span once the answer's last byte went out."""
    given = list(headers)
    carrier = {
        name.decode("latin-1"): value.decode("latin-1") for name, value in given if name in CARRIED
    }
    span = tracer.start_span(
        f"{method} {path}",
        context=propagate.extract(carrier) if carrier else None,
        kind=SpanKind.SERVER,
        attributes={"http.request.method": method, "url.path": path, "oai.hop": "gateway"},
    )
    onward: dict[str, str] = {}
    propagate.inject(onward, context=set_span_in_context(span))
    kept = [(name, value) for name, value in given if name not in CARRIED]
    return span, kept + [(k.encode("latin-1"), v.encode("latin-1")) for k, v in onward.items()]
