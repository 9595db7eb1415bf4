"""The engine's span of a traced request: what the request waited on inside the engine.

Started as the request reaches the engine (`InstrumentedEngine.submit`) and ended with
its measurement (`Measurement.end`), so a stream's engine span ends when its last step
is read. Its children, `queue`, `prefill` and `decode`, are drawn afterwards from the
times the measurement kept and vLLM's own request stats (queued, scheduled, first token),
rather than opened and closed around each step: a traced stream costs nothing per token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from time import perf_counter

from opentelemetry.trace import Span, Status, StatusCode, Tracer, set_span_in_context
from opentelemetry.util.types import AttributeValue

from oai_server.engine.types import GenerationStep, SamplingOptions


@dataclass(frozen=True, slots=True)
class EngineSpan:
    """The engine's span of one request, and the tracer that draws its children."""

    tracer: Tracer
    span: Span


def start_engine_span(
    tracer: Tracer, request_id: str, model: str, options: SamplingOptions
) -> EngineSpan:
    """The engine's span of request `request_id`, a child of the current span."""
    span = tracer.start_span(
        "engine",
        attributes={
            "gen_ai.request.id": request_id,
            "gen_ai.response.model": model,
            "gen_ai.request.max_tokens": options.max_tokens,
            "gen_ai.request.choice.count": options.n,
        },
    )
    return EngineSpan(tracer, span)


@dataclass(frozen=True, slots=True)
class EngineTimes:
    """What a request's measurement kept: `perf_counter` readings and its counts."""

    submitted: float
    first: float  # the first step's arrival (with `first_step`)
    last: float
    first_step: GenerationStep | None
    prompt_tokens: int
    generated: int
    finished: list[str]
    cut: bool


def end_engine_span(traced: EngineSpan, m: EngineTimes) -> None:
    """End the span with `m`'s counts and latencies, and draw its queue, prefill and decode."""
    tracer, span = traced.tracer, traced.span
    now_ns, now = time.time_ns(), perf_counter()

    def wall(t: float) -> int:  # a perf_counter reading as the wall clock's nanoseconds
        return now_ns - int((now - t) * 1e9)

    attributes: dict[str, AttributeValue] = {
        "gen_ai.usage.input_tokens": m.prompt_tokens,
        "gen_ai.usage.output_tokens": m.generated,
        "gen_ai.latency.e2e": now - m.submitted,
    }
    if m.finished:
        attributes["gen_ai.response.finish_reasons"] = list(m.finished)
    step = m.first_step
    if step is not None:
        queued = step.queue_time or 0.0
        attributes["gen_ai.latency.time_to_first_token"] = m.first - m.submitted
        attributes["gen_ai.latency.time_in_model_decode"] = m.last - m.first
        attributes["gen_ai.usage.cache_read.input_tokens"] = step.cached_tokens
        if step.queue_time is not None:
            attributes["gen_ai.latency.time_in_queue"] = step.queue_time
        if step.prefill_time is not None:
            attributes["gen_ai.latency.time_in_model_prefill"] = step.prefill_time
        parent = set_span_in_context(span)
        scheduled = m.submitted + queued
        prefilled = m.first if step.prefill_time is None else scheduled + step.prefill_time
        for name, begin, end in (
            ("queue", m.submitted, scheduled),
            ("prefill", scheduled, min(prefilled, m.first)),
            ("decode", m.first, m.last),
        ):
            child = tracer.start_span(name, context=parent, start_time=wall(begin))
            child.end(end_time=wall(max(begin, end)))
    span.set_attributes(attributes)
    if m.cut:
        span.set_status(Status(StatusCode.ERROR, "the server shut down"))
    span.end(end_time=now_ns)
