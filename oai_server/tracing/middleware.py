"""Each HTTP request's server span: a client's W3C trace continued, else a new trace.

Pure ASGI, as the other middleware. The span is current while the app answers, so what
the request waits on opens its child spans under it (`observability.spans`); the app's
call returns once the answer's last byte went out, so a stream's span ends with the
stream. The GenAI attributes the answer knows at its end (the served model, the tokens,
the finish reasons) are read from the request's `RequestRecord`.
"""

from __future__ import annotations

from opentelemetry import propagate
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oai_server.observability.context import current_request
from oai_server.observability.spans import current_tracer

# The headers a propagator reads (W3C trace context and baggage, or what OTEL_PROPAGATORS names).
CARRIED = frozenset({b"traceparent", b"tracestate", b"baggage"})


class TracingMiddleware:
    """One SERVER span per HTTP request, continuing the client's `traceparent`."""

    def __init__(self, app: ASGIApp, tracer: Tracer, log_text: bool = False) -> None:
        """`log_text`: put the prompt's text in the span (`--log-request-text`)."""
        self.app = app
        self.tracer = tracer
        self.log_text = log_text

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in CARRIED
        }
        parent = propagate.extract(carrier) if carrier else None
        method, path = scope.get("method", "GET"), scope["path"]
        status = 500

        async def send_and_observe(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with self.tracer.start_as_current_span(
            f"{method} {path}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": path},
            # An exception reaching here is Starlette's 500, recorded below by status.
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            token = current_tracer.set(self.tracer)
            try:
                await self.app(scope, receive, send_and_observe)
            finally:
                current_tracer.reset(token)
                self._finish(span, scope, status)

    def _finish(self, span: Span, scope: Scope, status: int) -> None:
        attributes: dict[str, AttributeValue] = {"http.response.status_code": status}
        route = getattr(scope.get("route"), "path", None)
        if isinstance(route, str):
            attributes["http.route"] = route
        record = current_request.get()
        if record is not None:
            attributes["oai.request_id"] = record.request_id
            if record.principal:
                attributes["oai.api_key_id"] = record.principal
            if record.model:
                attributes["gen_ai.response.model"] = record.model
            if record.prompt_tokens or record.completion_tokens:
                attributes["gen_ai.usage.input_tokens"] = record.prompt_tokens
                attributes["gen_ai.usage.output_tokens"] = record.completion_tokens
            if record.finish_reasons:
                attributes["gen_ai.response.finish_reasons"] = list(record.finish_reasons)
            if self.log_text and record.prompt_text:
                attributes["gen_ai.prompt"] = record.prompt_text
        span.set_attributes(attributes)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR, f"HTTP {status}"))
