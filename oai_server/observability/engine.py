"""The engine as the server uses it: measured, metered, limited and drainable.

`InstrumentedEngine` wraps any `Engine` and sees every request the services submit,
without the services knowing: it reserves tokens against the caller's limit before
the request reaches the engine (`admit`), counts tokens and finish reasons into the
request's `RequestRecord`, feeds the latency histograms, and, when the server drains,
aborts what is left and ends those requests with `ServerShuttingDownError`.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from oai_server.engine.protocol import Engine
from oai_server.engine.types import GenerationStep, SamplingOptions
from oai_server.engine.wrapper import EngineWrapper
from oai_server.errors import ServerShuttingDownError
from oai_server.observability.context import RequestRecord, current_request
from oai_server.observability.metrics import Metrics

# Called before a request reaches the engine with the tokens it may use at most
# (prompt plus the requested maximum); raises to refuse it.
Admit = Callable[[RequestRecord | None, int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _ModelSeries:
    """The engine series of one `model` label value."""

    time_to_first_token: Any
    queue_time: Any
    e2e_latency: Any
    inter_token_latency: Any
    prompt_tokens: Any
    generation_tokens: Any

    @classmethod
    def of(cls, m: Metrics, model: str) -> _ModelSeries:
        return cls(
            m.time_to_first_token.labels(model),
            m.queue_time.labels(model),
            m.e2e_latency.labels(model),
            m.inter_token_latency.labels(model),
            m.prompt_tokens.labels(model),
            m.generation_tokens.labels(model),
        )


class InstrumentedEngine(EngineWrapper):
    """`inner`, with every generation measured into `metrics` and the request's record."""

    def __init__(
        self,
        inner: Engine,
        metrics: Metrics,
        admit: Admit | None = None,
        *,
        keep_prompt_text: bool = False,
        model_name: str = "",
    ) -> None:
        """`keep_prompt_text`: put each prompt's text in its record, for the access log;
        `model_name`: the `model` label of requests that name no model of their own."""
        super().__init__(inner)
        self.metrics = metrics
        self.admit = admit
        self.keep_prompt_text = keep_prompt_text
        self.model_name = model_name
        self._waiting: set[str] = set()
        self._live: set[str] = set()
        self._cut: set[str] = set()
        # prometheus_client's labels() validates and locks on every call: children cached.
        self._finished: dict[tuple[str, str], Any] = {}
        self._series: dict[str, _ModelSeries] = {}

    def _model_series(self, model: str) -> _ModelSeries:
        series = self._series.get(model)
        if series is None:
            series = self._series[model] = _ModelSeries.of(self.metrics, model)
        return series

    # --- what the wrapper adds -------------------------------------------------
    def waiting_requests(self) -> int:
        """Requests submitted that have no output yet (queued or in prefill)."""
        return len(self._waiting)

    def live_requests(self) -> int:
        return len(self._live)

    async def abort_all(self) -> None:
        """Abort every request in flight; each ends with `ServerShuttingDownError`."""
        for request_id in list(self._live):
            self._cut.add(request_id)
            await self.inner.abort(request_id)

    async def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
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
        m = self._model_series(model)
        submitted = last = time.perf_counter()
        prompt_tokens = generated = 0
        finished: list[str] = []
        # The gaps between tokens, tallied per bucket here (a call per token saved) and
        # added to the histogram once the request ends.
        gaps = m.inter_token_latency.tally()
        bounds, gap_counts, gap_total = gaps.bounds, gaps.counts, 0.0
        self._live.add(request_id)
        self._waiting.add(request_id)
        try:
            async for step in self.inner.generate(request_id, prompt_token_ids, options):
                if request_id in self._cut:
                    raise _shutting_down()
                now = time.perf_counter()
                tokens = 0
                for c in step.choices:
                    tokens += c.token_count
                    if c.finish_reason is not None:
                        finished.append(c.finish_reason)
                if not prompt_tokens:
                    prompt_tokens = step.prompt_tokens or len(prompt_token_ids)
                    self._waiting.discard(request_id)
                    m.time_to_first_token.observe(now - submitted)
                    if step.queue_time is not None:
                        m.queue_time.observe(step.queue_time)
                elif tokens:
                    gap = (now - last) / tokens
                    gap_counts[bisect_left(bounds, gap)] += 1
                    gap_total += gap
                last = now
                generated += tokens
                yield step
            if request_id in self._cut:
                raise _shutting_down()
        finally:
            # Counted once at the end: per step, only a tally of the gaps between tokens.
            m.e2e_latency.observe(time.perf_counter() - submitted)
            gaps.total = gap_total
            m.inter_token_latency.add(gaps)
            m.prompt_tokens.inc(prompt_tokens)
            m.generation_tokens.inc(generated)
            for reason in finished:
                counted = self._finished.get((reason, model))
                if counted is None:
                    counted = self.metrics.finished.labels(reason, model)
                    self._finished[(reason, model)] = counted
                counted.inc()
            if record is not None:
                record.prompt_tokens += prompt_tokens
                record.completion_tokens += generated
                record.finish_reasons += finished
            self._waiting.discard(request_id)
            self._live.discard(request_id)
            self._cut.discard(request_id)


def _shutting_down() -> ServerShuttingDownError:
    return ServerShuttingDownError(
        "The server is shutting down and could not finish this request in time; retry it."
    )
