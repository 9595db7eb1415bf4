"""Text completions (`/v1/completions`): one engine request per prompt in the batch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from oai_server.engine.protocol import Engine
from oai_server.engine.types import ChoiceDelta
from oai_server.errors import InvalidRequestError
from oai_server.generation.engine_request import Generation
from oai_server.generation.logprobs import completion_logprobs, merge_completion_logprobs
from oai_server.generation.offload import off_loop
from oai_server.generation.prompt_bound import tokens_at_least
from oai_server.generation.sampling import build_options, resolve_max_tokens
from oai_server.generation.work_limits import (
    WorkLimits,
    check_options_token_ids,
    check_token_ids,
)
from oai_server.ids import new_request_id
from oai_server.models import ModelRegistry
from oai_server.services.common import (
    StreamSettings,
    check_model,
    finish_reason,
    reject_unsupported,
    structured_output,
    usage_of,
)
from oai_server.services.completion_assembler import CompletionAssembler
from oai_server.services.completion_batch import Batch, Candidate, CompletionJob, PromptRun
from oai_server.services.events import Chunks, EventStream, Finish, Light, TextDelta, Usage
from schemas.common import CompletionUsage
from schemas.completions import (
    CompletionChoice,
    CompletionLogprobs,
    CreateCompletionRequest,
    CreateCompletionResponse,
)

# What OpenAI generates from when no prompt is given.
DEFAULT_PROMPT = "<|endoftext|>"


@dataclass
class CompletionService:
    """Serves `/v1/completions` for one model."""

    engine: Engine
    model_name: str
    limits: WorkLimits = field(default_factory=WorkLimits)
    # The server's other models, so a request naming one gets the error that says which.
    models: ModelRegistry | None = None

    async def _prompts(self, req: CreateCompletionRequest, engine: Engine) -> list[list[int]]:
        prompt = DEFAULT_PROMPT if req.prompt is None else req.prompt
        if isinstance(prompt, str):
            items: list[str] | list[list[int]] = [prompt]
        elif prompt and isinstance(prompt[0], int):
            items = [prompt]
        else:
            items = prompt  # type: ignore[assignment]
        if not items:
            raise InvalidRequestError("'prompt' must not be an empty list.", param="prompt")
        self.limits.check_prompt_count(len(items))
        size = sum(len(p) for p in items if isinstance(p, str))
        token_lists = await off_loop(size, self._encode, req, items, engine)
        if any(not tokens for tokens in token_lists):
            raise InvalidRequestError("A prompt must not be empty.", param="prompt")
        vocab_size = engine.model_info.vocab_size
        for p in items:
            if not isinstance(p, str):
                check_token_ids(p, vocab_size, "prompt")
        return token_lists

    def _encode(
        self, req: CreateCompletionRequest, items: list[str] | list[list[int]], engine: Engine
    ) -> list[list[int]]:
        """The token ids of every prompt; a batch that cannot fit (a prompt past the context,
        or all of them past the server's work limit) is refused before it is tokenized."""
        tokenizer, model = engine.tokenizer, engine.model_info
        requested = 1 if req.echo and req.max_tokens == 0 else req.max_tokens
        least = [
            tokens_at_least(p, tokenizer, model.vocab_size, model.max_model_len)
            if isinstance(p, str)
            else len(p)
            for p in items
        ]
        if any(isinstance(p, str) and n for p, n in zip(items, least, strict=True)):
            samples = req.best_of or req.n or 1
            total = sum(
                self.limits.least_work(
                    n, requested, samples, model.max_model_len, prompt_param="prompt"
                )
                for n in least
            )
            param = "prompt" if len(items) > 1 else "max_tokens"
            self.limits.check_total(total, param=param, at_least=True)
        return [tokenizer.encode(p) if isinstance(p, str) else list(p) for p in items]

    def _check(self, req: CreateCompletionRequest) -> int:
        """Validate what depends on several fields; return how many samples to draw."""
        n = req.n or 1
        best_of = req.best_of or n
        if best_of < n:
            raise InvalidRequestError("'best_of' must be at least 'n'.", param="best_of")
        if best_of > n and req.stream:
            raise InvalidRequestError("'best_of' results cannot be streamed.", param="best_of")
        return best_of

    async def prepare(self, req: CreateCompletionRequest) -> CompletionJob:
        """Validate `req` and convert it into one engine prompt and options per prompt."""
        target = check_model(req.model, self.model_name, models=self.models)
        engine = self.engine.serving(target.model)
        reject_unsupported(req)
        samples = self._check(req)
        prompts = await self._prompts(req, engine)
        score_only = bool(req.echo and req.max_tokens == 0)
        model = engine.model_info
        requested = 1 if score_only else req.max_tokens
        budgets = [
            resolve_max_tokens(
                requested,
                len(p),
                model.max_model_len,
                prompt_param="prompt",
                default=model.sampling_defaults.max_tokens,
                cap=model.sampling_defaults.max_tokens_cap,
                strict=self.limits.strict_max_tokens,
            )
            for p in prompts
        ]
        # best_of ranks samples by logprob per token, so it needs the sampled tokens' logprobs.
        logprobs = req.logprobs if req.logprobs is not None else (0 if samples > 1 else None)
        options = [
            build_options(
                req,
                max_tokens=budget,
                defaults=model.sampling_defaults,
                n=samples,
                logprobs=logprobs,
                prompt_logprobs=req.logprobs if req.echo and req.logprobs is not None else None,
                structured=structured_output(req.response_format),
                adapter=target.adapter,
                model=target.model,
            )
            for budget in budgets
        ]
        self.limits.check_work(prompts, options, prompt_param="prompt")
        check_options_token_ids(options[0], model.vocab_size)
        return CompletionJob(req, prompts, options, score_only)

    async def start(self, job: CompletionJob, request_id: str | None = None) -> Batch:
        """Hand every prompt of `job` to the engine at once; return when all have begun.

        Submitted together, so the engine batches them and a client that leaves while
        they wait aborts all of them, not just the one being awaited.
        """
        batch = Batch(request_id or new_request_id("cmpl"), job, int(time.time()))
        single = len(job.prompts) == 1
        starts = [
            asyncio.ensure_future(
                Generation.start(self.engine, batch.id if single else f"{batch.id}-{i}", p, o)
            )
            for i, (p, o) in enumerate(zip(job.prompts, job.options, strict=True))
        ]
        try:
            generations = await asyncio.gather(*starts)
        except BaseException:
            for task in starts:
                task.cancel()
            for outcome in await asyncio.gather(*starts, return_exceptions=True):
                if isinstance(outcome, Generation):
                    await outcome.close()
            raise
        batch.runs = [
            self._echo(job.req, p, g, job.options[0].model)
            for p, g in zip(job.prompts, generations, strict=True)
        ]
        return batch

    def _echo(
        self, req: CreateCompletionRequest, prompt: list[int], g: Generation, model: str | None
    ) -> PromptRun:
        if not req.echo:
            return PromptRun(g)
        tokenizer = self.engine.serving(model).tokenizer
        run = PromptRun(g, echo=tokenizer.decode(prompt))
        entries = g.prompt_logprobs
        if req.logprobs is not None and entries is not None:
            run.echo_logprobs = completion_logprobs(entries, 0, tokenizer.decode(prompt[:1]))
        return run

    async def complete(self, batch: Batch) -> CreateCompletionResponse:
        """The whole answer: the sum of the streamed events (`best_of` ranks its own)."""
        if batch.job.samples > batch.n:
            return await self._best_of(batch)
        assembler = CompletionAssembler(with_logprobs=batch.req.logprobs is not None)
        async for event in self._events(batch, StreamSettings(True, False)):
            assembler.add(event)
        return assembler.result(batch.id, batch.created, batch.req.model)

    async def _best_of(self, batch: Batch) -> CreateCompletionResponse:
        """Draw `best_of` samples per prompt, keep the `n` with the best logprob per token."""
        choices: list[CompletionChoice] = []
        try:
            for p, run in enumerate(batch.runs):
                candidates: dict[int, Candidate] = {}
                async for step in run.generation:
                    for delta in step.choices:
                        candidates.setdefault(delta.index, Candidate()).add(delta, batch, run)
                ranked = sorted(
                    candidates.values(),
                    key=lambda c: c.cumulative_logprob / max(c.tokens, 1),
                    reverse=True,
                )
                for i, cand in enumerate(ranked[: batch.n]):
                    choices.append(self._choice(p * batch.n + i, cand, run, batch.req))
        finally:
            await batch.close()
        return CreateCompletionResponse(
            id=batch.id,
            created=batch.created,
            model=batch.req.model,
            choices=choices,
            usage=usage_of(batch.usage()),
        )

    @staticmethod
    def _choice(
        index: int, cand: Candidate, run: PromptRun, req: CreateCompletionRequest
    ) -> CompletionChoice:
        logprobs: CompletionLogprobs | None = None
        if req.logprobs is not None:
            logprobs = completion_logprobs([], 0)
            for part in (run.echo_logprobs, cand.logprobs):
                if part is not None:
                    merge_completion_logprobs(logprobs, part)
        choice = CompletionChoice(
            index=index,
            text=run.echo + cand.text,
            logprobs=logprobs,
            finish_reason=finish_reason(cand.finish_reason or "stop"),
        )
        if cand.stop_reason is not None:
            choice.stop_reason = cand.stop_reason
        return choice

    def stream(self, batch: Batch) -> EventStream[CreateCompletionResponse]:
        """The events of every prompt's answer, prompt after prompt.

        The engine runs all prompts at once; their output waits in the engine's
        per-request queues while an earlier prompt is being sent.
        """
        opts = StreamSettings.of(batch.req.stream_options)
        chunks = self.chunks((batch.id, batch.created), batch.req.model, opts)
        return EventStream(self._events(batch, opts), chunks)

    def chunk(
        self,
        id_: str,
        created: int,
        model: str,
        opts: StreamSettings,
        choices: list[CompletionChoice],
        usage: CompletionUsage | None = None,
    ) -> CreateCompletionResponse:
        """A chunk of the answer `id_` of `model` (the base model's name, or an adapter's),
        as streamed live and as the response cache replays it.

        With `include_usage`, `usage` is null unless given (the last chunk, or continuous stats).
        """
        out = CreateCompletionResponse(id=id_, created=created, model=model, choices=choices)
        if opts.include_usage:
            out.usage = usage
        return out

    def chunks(
        self, identity: tuple[str, int], model: str, opts: StreamSettings
    ) -> Chunks[CreateCompletionResponse]:
        """How the light events of the answer `identity` (`id`, `created`) of `model` become
        its chunks, as streamed live and as the response cache replays them."""

        def build(id_: str, created: int, event: Light) -> CreateCompletionResponse:
            if isinstance(event, Usage):
                return self.chunk(id_, created, model, opts, [], usage_of(event))
            if isinstance(event, TextDelta):
                text, reason = event.text, None
            elif isinstance(event, Finish):
                text, reason = "", event.reason
            else:
                raise TypeError("a text completion has no opening chunk")
            choice = CompletionChoice(
                index=event.index, text=text, logprobs=None, finish_reason=reason
            )
            return self.chunk(id_, created, model, opts, [choice])

        shape = ("completions", model, opts.include_usage, opts.continuous_usage)
        return Chunks(build, identity, shape)

    def _chunk(
        self, batch: Batch, opts: StreamSettings, choices: list[CompletionChoice]
    ) -> CreateCompletionResponse:
        usage = usage_of(batch.usage()) if opts.continuous_usage else None
        return self.chunk(batch.id, batch.created, batch.req.model, opts, choices, usage)

    async def _events(
        self, batch: Batch, opts: StreamSettings
    ) -> AsyncIterator[CreateCompletionResponse | TextDelta | Usage]:
        # Plain text goes out as a bare `TextDelta`, unless each chunk differs anyway.
        bare_text = (
            batch.req.logprobs is None and not opts.continuous_usage and not batch.score_only
        )
        try:
            for p, run in enumerate(batch.runs):
                sent: dict[int, int] = {}  # characters of each choice sent so far
                async for step in run.generation:
                    for delta in step.choices:
                        if (
                            bare_text
                            and delta.text
                            and delta.finish_reason is None
                            and delta.index in sent
                        ):
                            sent[delta.index] += len(delta.text)
                            # The first prompt's delta is its own `TextDelta`.
                            yield TextDelta(p * batch.n + delta.index, delta.text) if p else delta
                            continue
                        out = self._stream_choice(p * batch.n, delta, run, batch, sent)
                        if out is not None:
                            yield self._chunk(batch, opts, [out])
        finally:
            await batch.close()
        if opts.include_usage:
            yield batch.usage()

    @staticmethod
    def _stream_choice(
        first_index: int, delta: ChoiceDelta, run: PromptRun, batch: Batch, sent: dict[int, int]
    ) -> CompletionChoice | None:
        """The chunk choice for `delta`; the echoed prompt goes out in a choice's first chunk."""
        first = delta.index not in sent
        text = "" if batch.score_only else delta.text
        offset = len(run.echo) if first else sent[delta.index]
        sent[delta.index] = offset + len(text)
        logprobs: CompletionLogprobs | None = None
        if batch.req.logprobs is not None:
            logprobs = completion_logprobs([], 0)
            if first and run.echo_logprobs is not None:
                merge_completion_logprobs(logprobs, run.echo_logprobs)
            if not batch.score_only:
                merge_completion_logprobs(
                    logprobs, completion_logprobs(delta.logprobs or [], offset)
                )
        if first:
            text = run.echo + text
        if not text and delta.finish_reason is None and not (logprobs and logprobs.tokens):
            return None
        reason = delta.finish_reason and finish_reason(delta.finish_reason)
        choice = CompletionChoice(
            index=first_index + delta.index, text=text, logprobs=logprobs, finish_reason=reason
        )
        if delta.stop_reason is not None:
            choice.stop_reason = delta.stop_reason
        return choice
