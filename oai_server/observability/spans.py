"""Trace spans of one request, for the code that does what the request waits on.

The tracing feature (`oai_server.tracing`) opens each request's server span and puts the
app's tracer in `current_tracer` for the request's task (and the tasks it starts). The
code a request waits on (the key check, the rate limits, the cache, the store, the
engine) opens its child span through `span(...)`, which, when tracing is off, is one
context-variable read and a shared no-op context manager: nothing is built, nothing
exported. OpenTelemetry's own context (the API's) carries the parent span.

Attribute names are OpenTelemetry's GenAI semantic conventions (`gen_ai.*`), and vLLM's
own for the engine's latencies (`gen_ai.latency.*`), so a backend that reads vLLM's spans
reads these.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, Tracer
from opentelemetry.util.types import AttributeValue

current_tracer: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar(
    "oai_current_tracer", default=None
)

_OFF: contextlib.nullcontext[None] = contextlib.nullcontext()

# The request's id prefix (`engine_request_id`) names its GenAI operation.
_OPERATIONS = {
    "chatcmpl": "chat",
    "cmpl": "text_completion",
    "embd": "embeddings",
    "score": "rerank",
}
# The request's sampling fields, as GenAI's `gen_ai.request.*` attributes.
_SAMPLING = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
    "n": "gen_ai.request.choice.count",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens",  # Responses' name for it
}


def span(
    name: str, attributes: Mapping[str, AttributeValue] | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """A child span of the current one, made current while the block runs; when tracing
    is off, a shared no-op (the block gets None)."""
    tracer = current_tracer.get()
    if tracer is None:
        return _OFF
    return tracer.start_as_current_span(name, attributes=attributes)


@contextlib.contextmanager
def new_trace(
    tracer: Tracer | None,
    name: str,
    origin: SpanContext | None,
    attributes: Mapping[str, AttributeValue],
) -> Iterator[None]:
    """A trace of its own for work a request started and that outlives it (a batch line,
    a background response), its root span linked to `origin` (the starting request's
    span); the work's own spans (the engine's) go under it. Nothing when `tracer` is None."""
    if tracer is None:
        yield
        return
    links = [Link(origin)] if origin is not None and origin.is_valid else []
    token = current_tracer.set(tracer)
    try:
        # An empty context: a new trace, not a child of whatever was current.
        with tracer.start_as_current_span(
            name, context=Context(), links=links, attributes=attributes
        ):
            yield
    finally:
        current_tracer.reset(token)


def current_origin() -> SpanContext | None:
    """The current span's context, for `new_trace`'s link; None when nothing is traced."""
    if current_tracer.get() is None:
        return None
    context = trace.get_current_span().get_span_context()
    return context if context.is_valid else None


def describe_request(req: object, request_id: str | None) -> None:
    """Name the current server span after `req`'s GenAI operation and model, and record
    its sampling fields (`answer` calls this when a request is traced)."""
    current = trace.get_current_span()
    if not current.is_recording():
        return
    operation = _OPERATIONS.get((request_id or "").partition("-")[0], "chat")
    model = getattr(req, "model", None)
    attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": operation}
    if isinstance(model, str):
        attributes["gen_ai.request.model"] = model
    if request_id is not None:
        attributes["gen_ai.response.id"] = request_id
    for field, name in _SAMPLING.items():
        value: Any = getattr(req, field, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[name] = value
    stop = getattr(req, "stop", None)
    if stop:
        attributes["gen_ai.request.stop_sequences"] = [stop] if isinstance(stop, str) else stop
    current.set_attributes(attributes)
    current.update_name(f"{operation} {model}" if isinstance(model, str) else operation)
