"""The engine as the server measures it: every generation's metrics, record and span.

`InstrumentedEngine` wraps any `Engine` and sees every request the services submit,
without the services knowing. It admits each through the admission step (`admit`, see
`oai_server.admission`: the caller's token limit, the batch's hand-back) before the request
reaches the engine; then counts tokens and finish reasons into the request's `RequestRecord`,
feeds the latency histograms, and keeps the requests in flight (`InFlight`), which the drain
cuts (`abort_all`: each ends with `ServerShuttingDownError`). A traced request (tracing on)
also gets its engine span (`engine_spans`), ended with its measurement.

Each request's measurement is a `Measurement`, called once per engine step by whoever
reads the steps (`Generation`, through `submit`), rather than a generator wrapped around
the engine's: a generator layer costs a resume and a step object per token, on every
streamed chunk of every answer. `generate` (the `Engine` interface) is the same
measurement around the engine's steps, for any other reader.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from oai_server.engine.protocol import Engine
from oai_server.engine.types import GenerationStep, SamplingOptions
from oai_server.engine.wrapper import EngineWrapper
from oai_server.errors import ServerShuttingDownError
from oai_server.observability.context import RequestRecord, current_request
from oai_server.observability.engine_spans import (
    EngineSpan,
    EngineTimes,
    end_engine_span,
    start_engine_span,
)
from oai_server.observability.metrics import Metrics
from oai_server.observability.spans import current_tracer
from oai_server.observability.usage import UsageMeter

# The admission step's (`Admission.admit`): called before a request reaches the engine
# with the tokens it may use at most (prompt plus the requested maximum); raises to refuse.
Admit = Callable[[RequestRecord | None, int], Awaitable[None]]


@dataclass(slots=True)
class InFlight:
    """The generations the measured engine holds, by request id: `waiting`, those without
    output yet (queued or in prefill; the metrics' gauge, the batch runner's admission), and
    `live`, every one (what the drain cuts).

    Built before the metrics, whose gauge reads it, and the engine, which fills it.
    """

    waiting: set[str] = field(default_factory=set)
    # Weak: a generation dropped unread (never closed) leaves no entry behind.
    live: weakref.WeakValueDictionary[str, Measurement] = field(
        default_factory=weakref.WeakValueDictionary
    )

    def waiting_requests(self) -> int:
        """Requests submitted that have no output yet (queued or in prefill)."""
        return len(self.waiting)

    def live_requests(self) -> int:
        return len(self.live)


@dataclass(frozen=True, slots=True)
class ModelSeries:
    """The engine series of one `model` label value."""

    model: str
    time_to_first_token: Any
    queue_time: Any
    e2e_latency: Any
    inter_token_latency: Any
    prompt_tokens: Any
    generation_tokens: Any
    # `oai_request_finished`, labelled by reason and model: its children by reason in
    # `finished_by_reason` (prometheus_client's labels() validates and locks on every call).
    finished: Any
    finished_by_reason: dict[str, Any]

    @classmethod
    def of(cls, m: Metrics, model: str) -> ModelSeries:
        return cls(
            model,
            m.time_to_first_token.labels(model),
            m.queue_time.labels(model),
            m.e2e_latency.labels(model),
            m.inter_token_latency.labels(model),
            m.prompt_tokens.labels(model),
            m.generation_tokens.labels(model),
            m.finished,
            {},
        )


class Measurement:
    """One generation's measurement: `step` for each engine step, `stopped` if the
    engine's steps ran out, `end` once, however it ended.

    It writes to what it is given: its model's `series`, the `usage` meter, and the
    engine's requests `in_flight`, which it leaves as it gets its first output and ends.
    """

    # Slots: `step` reads and writes several of these per token.
    __slots__ = (
        "__weakref__",
        "bounds",
        "cached",
        "counts",
        "cut",
        "ended",
        "finished",
        "first",
        "first_step",
        "gap_total",
        "gaps",
        "generated",
        "in_flight",
        "last",
        "model",
        "prompt_length",
        "prompt_tokens",
        "record",
        "request_id",
        "series",
        "several",
        "span",
        "submitted",
        "tier",
        "usage",
    )

    def __init__(
        self,
        in_flight: InFlight,
        series: ModelSeries,
        usage: UsageMeter,
        request_id: str,
        prompt_length: int,
        options: SamplingOptions,
        record: RequestRecord | None,
    ) -> None:
        self.in_flight = in_flight
        self.series = series
        self.usage = usage
        self.request_id = request_id
        self.prompt_length = prompt_length
        self.model = series.model
        self.record = record
        # One choice finishes with its request: its finish reason is on the last step.
        self.several = options.n > 1
        self.tier = options.service_tier
        # Set by `abort_all`: the request ends with `ServerShuttingDownError`.
        self.cut = False
        self.submitted = self.last = perf_counter()
        self.prompt_tokens = self.generated = self.cached = 0
        self.finished: list[str] = []
        # The gaps between tokens, tallied per bucket here (a call per token saved) and
        # added to the histogram once the request ends.
        self.gaps = series.inter_token_latency.tally()
        self.bounds, self.counts = self.gaps.bounds, self.gaps.counts
        self.gap_total = 0.0
        self.ended = False
        # Traced requests only: the engine's span, and when and what the first step was.
        self.span: EngineSpan | None = None
        self.first = 0.0
        self.first_step: GenerationStep | None = None

    def step(self, step: GenerationStep, tokens: int) -> None:
        """Count `step`, which brought `tokens` tokens, as it arrives; raise if the server
        cut the request."""
        if self.cut:
            raise _shutting_down()
        now = perf_counter()
        if self.prompt_tokens:
            if tokens:
                gap = (now - self.last) / tokens
                self.counts[bisect_left(self.bounds, gap)] += 1
                self.gap_total += gap
        else:
            self.prompt_tokens = step.prompt_tokens or self.prompt_length
            self.first, self.first_step = now, step
            self.cached = step.cached_tokens
            self.in_flight.waiting.discard(self.request_id)
            self.series.time_to_first_token.observe(now - self.submitted)
            if step.queue_time is not None:
                self.series.queue_time.observe(step.queue_time)
        self.last = now
        self.generated += tokens
        if step.finished or self.several:
            # Known once scheduled: the first step may not have it yet.
            if step.cached_tokens > self.cached:
                self.cached = step.cached_tokens
            for c in step.choices:
                if c.finish_reason is not None:
                    self.finished.append(c.finish_reason)

    def stopped(self) -> None:
        """The engine's steps ran out; raise if that is because the server cut them."""
        if self.cut:
            raise _shutting_down()

    def end(self) -> None:
        """Count the request into the metrics and its record, once."""
        if self.ended:
            return
        self.ended = True
        m = self.series
        m.e2e_latency.observe(perf_counter() - self.submitted)
        self.gaps.total = self.gap_total
        m.inter_token_latency.add(self.gaps)
        m.prompt_tokens.inc(self.prompt_tokens)
        m.generation_tokens.inc(self.generated)
        by_reason = m.finished_by_reason
        for reason in self.finished:
            counted = by_reason.get(reason)
            if counted is None:
                counted = by_reason[reason] = m.finished.labels(reason, self.model)
            counted.inc()
        record = self.record
        if self.prompt_tokens:  # else the engine never started it: nothing was used
            self.usage.add(
                "completions",
                record,
                self.model,
                self.tier,
                self.prompt_tokens,
                self.cached,
                self.generated,
            )
        if record is not None:
            record.prompt_tokens += self.prompt_tokens
            record.completion_tokens += self.generated
            record.finish_reasons += self.finished
        in_flight = self.in_flight
        in_flight.waiting.discard(self.request_id)
        in_flight.live.pop(self.request_id, None)
        if self.span is not None:
            times = EngineTimes(
                self.submitted,
                self.first,
                self.last,
                self.first_step,
                self.prompt_tokens,
                self.generated,
                self.finished,
                self.cut,
            )
            end_engine_span(self.span, times)


class InstrumentedEngine(EngineWrapper):
    """`inner`, with every generation admitted by `admit` and measured into `metrics`, the
    request's record and `in_flight`."""

    def __init__(
        self,
        inner: Engine,
        metrics: Metrics,
        in_flight: InFlight,
        admit: Admit | None = None,
        *,
        keep_prompt_text: bool = False,
        model_name: str = "",
    ) -> None:
        """`admit`: the admission step's (None: every request admitted);
        `keep_prompt_text`: put each prompt's text in its record, for the access log;
        `model_name`: the `model` label of requests that name no model of their own."""
        super().__init__(inner)
        self.metrics = metrics
        self.in_flight = in_flight
        self.admit = admit
        self.keep_prompt_text = keep_prompt_text
        self.model_name = model_name
        self._series: dict[str, ModelSeries] = {}

    def series(self, model: str) -> ModelSeries:
        """The engine series of `model`, made once."""
        series = self._series.get(model)
        if series is None:
            series = self._series[model] = ModelSeries.of(self.metrics, model)
        return series

    # --- what the wrapper adds -------------------------------------------------
    def waiting_requests(self) -> int:
        """Requests submitted that have no output yet (queued or in prefill)."""
        return len(self.in_flight.waiting)

    def live_requests(self) -> int:
        return len(self.in_flight.live)

    async def abort_all(self) -> None:
        """Abort every request in flight; each ends with `ServerShuttingDownError`."""
        for request_id, measurement in list(self.in_flight.live.items()):
            measurement.cut = True
            await self.inner.abort(request_id)

    async def submit(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> tuple[AsyncIterator[GenerationStep], Measurement]:
        """Admit the request and hand it to the engine: its steps, and their measurement,
        which the reader of the steps calls (see `Measurement`)."""
        record = current_request.get()
        # The served name the request resolved to: its adapter's, else its model's.
        model = options.adapter or options.model or self.model_name
        if record is not None:
            record.model = model
        if self.admit is not None:
            await self.admit(record, len(prompt_token_ids) + options.max_tokens * options.n)
        if self.keep_prompt_text and record is not None:
            text = self.inner.serving(options.model).tokenizer.decode(prompt_token_ids)
            record.prompt_text = text if record.prompt_text is None else record.prompt_text + text
        steps = aiter(self.inner.generate(request_id, prompt_token_ids, options))
        in_flight = self.in_flight
        measurement = Measurement(
            in_flight,
            self.series(model),
            self.metrics.usage,
            request_id,
            len(prompt_token_ids),
            options,
            record,
        )
        tracer = current_tracer.get()
        if tracer is not None:
            measurement.span = start_engine_span(tracer, request_id, model, options)
        in_flight.live[request_id] = measurement
        in_flight.waiting.add(request_id)
        return steps, measurement

    async def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
        steps, measurement = await self.submit(request_id, prompt_token_ids, options)
        try:
            async for step in steps:
                measurement.step(step, sum(c.token_count for c in step.choices))
                yield step
            measurement.stopped()
        finally:
            measurement.end()


def _shutting_down() -> ServerShuttingDownError:
    return ServerShuttingDownError(
        "The server is shutting down and could not finish this request in time; retry it."
    )
