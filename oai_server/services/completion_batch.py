"""A completions request as the engine runs it: the validated job, one engine request per
prompt (with what `echo` puts in front of its choices), and a sample gathered whole."""

from __future__ import annotations

from dataclasses import dataclass, field

from oai_server.engine.types import ChoiceDelta, FinishReason, SamplingOptions
from oai_server.generation.engine_request import Generation, Usage
from oai_server.generation.logprobs import completion_logprobs, merge_completion_logprobs
from schemas.completions import CompletionLogprobs, CreateCompletionRequest


@dataclass
class PromptRun:
    """One prompt's engine request, and what `echo` puts in front of its choices."""

    generation: Generation
    echo: str = ""
    echo_logprobs: CompletionLogprobs | None = None


@dataclass
class CompletionJob:
    """A validated completions request, converted into the engine's prompts and options."""

    req: CreateCompletionRequest
    prompts: list[list[int]]
    options: list[SamplingOptions]
    # `max_tokens: 0` with `echo` scores the prompt: one token is generated, then dropped.
    score_only: bool = False

    @property
    def prompt_tokens(self) -> int:
        return sum(len(prompt) for prompt in self.prompts)

    @property
    def n(self) -> int:
        return self.req.n or 1

    @property
    def samples(self) -> int:
        """How many samples are drawn per prompt (`best_of`, at least `n`)."""
        return self.options[0].n


@dataclass
class Batch:
    """The engine requests of one completions request, all started."""

    id: str
    job: CompletionJob
    created: int
    runs: list[PromptRun] = field(default_factory=list)

    @property
    def req(self) -> CreateCompletionRequest:
        return self.job.req

    @property
    def n(self) -> int:
        return self.job.n

    @property
    def score_only(self) -> bool:
        return self.job.score_only

    def usage(self) -> Usage:
        total = Usage()
        for run in self.runs:
            total.prompt_tokens += run.generation.usage.prompt_tokens
            total.cached_tokens += run.generation.usage.cached_tokens
            if not self.score_only:
                total.completion_tokens += run.generation.usage.completion_tokens
        return total

    async def close(self) -> None:
        for run in self.runs:
            await run.generation.close()


@dataclass
class Candidate:
    """One sampled completion, gathered whole."""

    text: str = ""
    logprobs: CompletionLogprobs | None = None
    cumulative_logprob: float = 0.0
    tokens: int = 0
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None

    def add(self, delta: ChoiceDelta, batch: Batch, run: PromptRun) -> None:
        if batch.score_only:
            self.finish_reason = "length"
            return
        if batch.req.logprobs is not None:
            offset = len(run.echo) + len(self.text)
            more = completion_logprobs(delta.logprobs or [], offset)
            if self.logprobs is None:
                self.logprobs = more
            else:
                merge_completion_logprobs(self.logprobs, more)
        self.text += delta.text
        self.tokens += delta.token_count
        self.cumulative_logprob = delta.cumulative_logprob or 0.0
        self.finish_reason = delta.finish_reason or self.finish_reason
        self.stop_reason = delta.stop_reason
