"""Chat completions: request in, engine request out, typed responses and chunks back."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from oai_server.chat_template import render_prompt
from oai_server.engine.protocol import Engine
from oai_server.generation import Generation, new_request_id
from oai_server.sampling import build_options, resolve_max_tokens
from oai_server.services.common import (
    StreamSettings,
    check_model,
    finish_reason,
    reject_unsupported,
    usage_of,
)
from schemas.chat import (
    ChatCompletionChoice,
    ChatCompletionChunkChoice,
    ChatCompletionDelta,
    ChatCompletionMessage,
    CreateChatCompletionRequest,
    CreateChatCompletionResponse,
    CreateChatCompletionStreamResponse,
)


@dataclass
class ChatService:
    """Serves `/v1/chat/completions` for one model."""

    engine: Engine
    model_name: str
    chat_template: str | None = None

    async def start(self, req: CreateChatCompletionRequest) -> Generation:
        """Validate `req` and start generating; every rejection happens here."""
        check_model(req.model, self.model_name)
        reject_unsupported(req)
        tokenizer = self.engine.tokenizer
        prompt = render_prompt(req, tokenizer, self.chat_template)
        requested: int | None = req.max_completion_tokens
        param = "max_completion_tokens"
        if requested is None:
            requested, param = req.max_tokens, "max_tokens"
        max_tokens = resolve_max_tokens(
            requested, len(prompt), self.engine.model_info.max_model_len, max_tokens_param=param
        )
        options = build_options(req, max_tokens=max_tokens)
        return await Generation.start(self.engine, new_request_id("chatcmpl"), prompt, options)

    async def complete(
        self, req: CreateChatCompletionRequest, generation: Generation
    ) -> CreateChatCompletionResponse:
        """Collect a whole answer."""
        n = req.n or 1
        texts = [""] * n
        choices: list[ChatCompletionChoice | None] = [None] * n
        async for step in generation:
            for delta in step.choices:
                texts[delta.index] += delta.text
                if delta.finish_reason is not None:
                    choice = ChatCompletionChoice(
                        index=delta.index,
                        message=ChatCompletionMessage(
                            content=texts[delta.index], refusal=None, annotations=[]
                        ),
                        logprobs=None,
                        finish_reason=finish_reason(delta.finish_reason),
                    )
                    if delta.stop_reason is not None:
                        choice.stop_reason = delta.stop_reason
                    choices[delta.index] = choice
        return CreateChatCompletionResponse(
            id=generation.request_id,
            created=int(time.time()),
            model=self.model_name,
            choices=[c for c in choices if c is not None],
            usage=usage_of(generation.usage),
        )

    async def stream(
        self, req: CreateChatCompletionRequest, generation: Generation
    ) -> AsyncIterator[CreateChatCompletionStreamResponse]:
        """The chunks of a streamed answer, exactly as OpenAI sends them."""
        opts = StreamSettings.of(req.stream_options)
        created = int(time.time())

        def chunk(choices: list[ChatCompletionChunkChoice]) -> CreateChatCompletionStreamResponse:
            out = CreateChatCompletionStreamResponse(
                id=generation.request_id, created=created, model=self.model_name, choices=choices
            )
            if opts.include_usage:
                out.usage = usage_of(generation.usage) if opts.continuous_usage else None
            return out

        for index in range(req.n or 1):
            yield chunk([_choice(index, ChatCompletionDelta(role="assistant", content=""))])
        async for step in generation:
            for delta in step.choices:
                if delta.text:
                    yield chunk([_choice(delta.index, ChatCompletionDelta(content=delta.text))])
                if delta.finish_reason is not None:
                    done = _choice(delta.index, ChatCompletionDelta())
                    done.finish_reason = finish_reason(delta.finish_reason)
                    if delta.stop_reason is not None:
                        done.stop_reason = delta.stop_reason
                    yield chunk([done])
        if opts.include_usage:
            final = chunk([])
            final.usage = usage_of(generation.usage)
            yield final


def _choice(index: int, delta: ChatCompletionDelta) -> ChatCompletionChunkChoice:
    return ChatCompletionChunkChoice(index=index, delta=delta, logprobs=None, finish_reason=None)
