"""Text completions (`/v1/completions`): one engine request per prompt in the batch."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from oai_server.engine.protocol import Engine
from oai_server.errors import InvalidRequestError
from oai_server.generation import Generation, Usage, new_request_id
from oai_server.sampling import build_options, resolve_max_tokens
from oai_server.services.common import (
    StreamSettings,
    check_model,
    finish_reason,
    reject_unsupported,
    usage_of,
)
from schemas.completions import CompletionChoice, CreateCompletionRequest, CreateCompletionResponse

# What OpenAI generates from when no prompt is given.
DEFAULT_PROMPT = "<|endoftext|>"


@dataclass
class Batch:
    """The engine requests of one completions request, all started."""

    id: str
    generations: list[Generation]

    def usage(self) -> Usage:
        total = Usage()
        for g in self.generations:
            total.prompt_tokens += g.usage.prompt_tokens
            total.completion_tokens += g.usage.completion_tokens
        return total

    async def close(self) -> None:
        for g in self.generations:
            await g.close()


@dataclass
class CompletionService:
    """Serves `/v1/completions` for one model."""

    engine: Engine
    model_name: str

    def _prompts(self, req: CreateCompletionRequest) -> list[list[int]]:
        prompt = DEFAULT_PROMPT if req.prompt is None else req.prompt
        if isinstance(prompt, str):
            items: list[str] | list[list[int]] = [prompt]
        elif prompt and isinstance(prompt[0], int):
            items = [prompt]
        else:
            items = prompt  # type: ignore[assignment]
        if not items:
            raise InvalidRequestError("'prompt' must not be an empty list.", param="prompt")
        encode = self.engine.tokenizer.encode
        token_lists = [encode(p) if isinstance(p, str) else list(p) for p in items]
        if any(not tokens for tokens in token_lists):
            raise InvalidRequestError("A prompt must not be empty.", param="prompt")
        return token_lists

    async def start(self, req: CreateCompletionRequest) -> Batch:
        """Validate `req` and start one engine request per prompt."""
        check_model(req.model, self.model_name)
        reject_unsupported(req)
        prompts = self._prompts(req)
        max_model_len = self.engine.model_info.max_model_len
        budgets = [
            resolve_max_tokens(req.max_tokens, len(p), max_model_len, prompt_param="prompt")
            for p in prompts
        ]
        batch = Batch(new_request_id("cmpl"), [])
        try:
            for i, (prompt, budget) in enumerate(zip(prompts, budgets, strict=True)):
                options = build_options(req, max_tokens=budget)
                rid = batch.id if len(prompts) == 1 else f"{batch.id}-{i}"
                batch.generations.append(await Generation.start(self.engine, rid, prompt, options))
        except BaseException:
            await batch.close()
            raise
        return batch

    async def complete(
        self, req: CreateCompletionRequest, batch: Batch
    ) -> CreateCompletionResponse:
        """Collect every prompt's whole answer."""
        n = req.n or 1
        choices: list[CompletionChoice] = []
        try:
            for p, generation in enumerate(batch.generations):
                texts = [""] * n
                async for step in generation:
                    for delta in step.choices:
                        texts[delta.index] += delta.text
                        if delta.finish_reason is not None:
                            choice = CompletionChoice(
                                index=p * n + delta.index,
                                text=texts[delta.index],
                                logprobs=None,
                                finish_reason=finish_reason(delta.finish_reason),
                            )
                            if delta.stop_reason is not None:
                                choice.stop_reason = delta.stop_reason
                            choices.append(choice)
        finally:
            await batch.close()
        choices.sort(key=lambda c: c.index)
        return CreateCompletionResponse(
            id=batch.id,
            created=int(time.time()),
            model=self.model_name,
            choices=choices,
            usage=usage_of(batch.usage()),
        )

    async def stream(
        self, req: CreateCompletionRequest, batch: Batch
    ) -> AsyncIterator[CreateCompletionResponse]:
        """Chunks of every prompt's answer, prompt after prompt.

        The engine runs all prompts at once; their output waits in the engine's
        per-request queues while an earlier prompt is being sent.
        """
        opts = StreamSettings.of(req.stream_options)
        created = int(time.time())
        n = req.n or 1

        def chunk(choices: list[CompletionChoice]) -> CreateCompletionResponse:
            out = CreateCompletionResponse(
                id=batch.id, created=created, model=self.model_name, choices=choices
            )
            if opts.include_usage:
                out.usage = usage_of(batch.usage()) if opts.continuous_usage else None
            return out

        try:
            for p, generation in enumerate(batch.generations):
                async for step in generation:
                    for delta in step.choices:
                        if not delta.text and delta.finish_reason is None:
                            continue
                        reason = delta.finish_reason and finish_reason(delta.finish_reason)
                        choice = CompletionChoice(
                            index=p * n + delta.index,
                            text=delta.text,
                            logprobs=None,
                            finish_reason=reason,
                        )
                        if delta.stop_reason is not None:
                            choice.stop_reason = delta.stop_reason
                        yield chunk([choice])
        finally:
            await batch.close()
        if opts.include_usage:
            final = chunk([])
            final.usage = usage_of(batch.usage())
            yield final
