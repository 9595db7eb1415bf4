"""Drive one engine request: start it, surface early errors, abort it if abandoned."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

from oai_server.engine.protocol import Engine
from oai_server.engine.types import GenerationStep, SamplingOptions, TokenLogprob
from oai_server.errors import InternalServerError
from oai_server.observability.engine import InstrumentedEngine, Measurement


@dataclass
class Usage:
    """Token counts of one request, updated as steps arrive (by `Generation`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Of the prompt tokens, those the engine's prefix cache held.
    cached_tokens: int = 0
    # Of the completion tokens, the thinking's (None: no reasoning parser, not counted).
    reasoning_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Generation:
    """An engine request whose first step has already arrived.

    Awaiting the first step before answering lets every error the engine raises at
    admission reach the client as a proper HTTP status instead of a broken stream.
    Iterate it once; leaving early (client gone, error) aborts the engine request.
    """

    engine: Engine
    request_id: str
    _steps: AsyncIterator[GenerationStep]
    _first: GenerationStep | None
    usage: Usage = field(default_factory=Usage)
    # Called once per step when the engine is the server's measured one (see `submit`).
    _measurement: Measurement | None = None
    finished: bool = False
    # The prompt tokens' logprobs, when they were asked for (they come with the first step).
    prompt_logprobs: list[TokenLogprob | None] | None = None

    @classmethod
    async def start(
        cls, engine: Engine, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> Generation:
        if isinstance(engine, InstrumentedEngine):
            steps, measurement = await engine.submit(request_id, prompt_token_ids, options)
        else:
            steps, measurement = aiter(engine.generate(request_id, prompt_token_ids, options)), None
        generation = cls(engine, request_id, steps, None, _measurement=measurement)
        # Known before any output: chunks sent ahead of the first token report it too.
        generation.usage.prompt_tokens = len(prompt_token_ids)
        try:
            first = await anext(steps, None)
            if first is None:
                if measurement is not None:
                    measurement.stopped()
                raise InternalServerError("The engine ended the request without any output.")
            if measurement is not None:
                # As each step arrives: the first, before the answer starts.
                measurement.step(first, sum(c.token_count for c in first.choices))
        except BaseException:
            await generation.close()
            raise
        generation._first = first
        generation.prompt_logprobs = first.prompt_logprobs
        return generation

    @property
    def first_step(self) -> GenerationStep | None:
        """The first step, in hand since `start`; None once iterated."""
        return self._first

    async def __aiter__(self) -> AsyncIterator[GenerationStep]:
        first, self._first = self._first, None
        try:
            if first is None:  # iterated before
                return
            self._count(first)  # measured as it arrived, in `start`
            yield first
            if first.finished:
                return
            # The rest counted inline, the commonest step (one choice) first: this loop
            # runs once per token of every answer, and a call per step is a tenth of it.
            usage, measurement = self.usage, self._measurement
            async for step in self._steps:
                choices = step.choices
                if len(choices) == 1:
                    tokens = choices[0].token_count
                else:
                    tokens = sum(c.token_count for c in choices)
                usage.completion_tokens += tokens
                if step.cached_tokens > usage.cached_tokens:
                    usage.cached_tokens = step.cached_tokens
                if measurement is not None:
                    measurement.step(step, tokens)
                if step.finished:
                    self.finished = True
                    yield step
                    return
                yield step
            if measurement is not None:
                measurement.stopped()
        finally:
            await self.close()

    def _count(self, step: GenerationStep) -> None:
        """Count the first step into the usage."""
        usage = self.usage
        usage.prompt_tokens = step.prompt_tokens
        usage.cached_tokens = max(usage.cached_tokens, step.cached_tokens)
        usage.completion_tokens += sum(c.token_count for c in step.choices)
        self.finished = step.finished

    async def close(self) -> None:
        """Release the engine request; abort it unless it finished."""
        if self._measurement is not None:
            self._measurement.end()
        aclose = getattr(self._steps, "aclose", None)
        if self.finished:  # nothing to abort: no shield to pay for, on every request
            if aclose is not None:
                await aclose()
            return
        # Shielded: this runs while the task is being cancelled (client disconnect),
        # and the abort must still reach the engine.
        with anyio.CancelScope(shield=True):
            await self.engine.abort(self.request_id)
            if aclose is not None:
                await aclose()
