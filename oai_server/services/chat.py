"""Chat completions: request in, engine request out, typed responses and chunks back."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from oai_server.chat_template import render_prompt
from oai_server.engine.protocol import Engine
from oai_server.errors import InvalidRequestError
from oai_server.generation import Generation, new_request_id
from oai_server.logprobs import chat_logprobs
from oai_server.sampling import build_options, resolve_max_tokens
from oai_server.services.chat_choice import ChoiceState
from oai_server.services.common import (
    StreamSettings,
    check_model,
    reject_unsupported,
    structured_output,
    usage_of,
)
from oai_server.sse import TextEvents
from oai_server.tool_calls.parsers import Content
from oai_server.tool_calls.plan import ToolPlan, plan_tools
from schemas.chat import (
    ChatCompletionChoice,
    ChatCompletionChunkChoice,
    ChatCompletionDelta,
    CreateChatCompletionRequest,
    CreateChatCompletionResponse,
    CreateChatCompletionStreamResponse,
)


@dataclass
class ChatRequest:
    """A validated chat request whose generation has started."""

    req: CreateChatCompletionRequest
    generation: Generation
    tools: ToolPlan

    def choices(self) -> list[ChoiceState]:
        return [ChoiceState(self.tools.make_parser()) for _ in range(self.req.n or 1)]


def _logprobs_count(req: CreateChatCompletionRequest) -> int | None:
    if req.top_logprobs is not None and not req.logprobs:
        raise InvalidRequestError(
            "'top_logprobs' needs 'logprobs' to be true.", param="top_logprobs"
        )
    return (req.top_logprobs or 0) if req.logprobs else None


@dataclass
class ChatService:
    """Serves `/v1/chat/completions` for one model."""

    engine: Engine
    model_name: str
    chat_template: str | None = None
    tool_parser: str = "hermes"

    async def start(self, req: CreateChatCompletionRequest) -> ChatRequest:
        """Validate `req` and start generating; every rejection happens here."""
        check_model(req.model, self.model_name)
        reject_unsupported(req)
        tools = plan_tools(req, self.tool_parser)
        structured = structured_output(req.response_format)
        if tools.structured is not None:
            structured = tools.structured
        prompt = render_prompt(req, self.engine.tokenizer, self.chat_template, tools.template_tools)
        requested: int | None = req.max_completion_tokens
        param = "max_completion_tokens"
        if requested is None:
            requested, param = req.max_tokens, "max_tokens"
        max_tokens = resolve_max_tokens(
            requested, len(prompt), self.engine.model_info.max_model_len, max_tokens_param=param
        )
        options = build_options(
            req, max_tokens=max_tokens, logprobs=_logprobs_count(req), structured=structured
        )
        generation = await Generation.start(
            self.engine, new_request_id("chatcmpl"), prompt, options
        )
        return ChatRequest(req, generation, tools)

    async def complete(self, chat: ChatRequest) -> CreateChatCompletionResponse:
        """Collect a whole answer."""
        states = chat.choices()
        choices: list[ChatCompletionChoice | None] = [None] * len(states)
        async for step in chat.generation:
            for delta in step.choices:
                state = states[delta.index]
                state.feed(delta.text)
                if delta.logprobs:
                    state.logprobs += delta.logprobs
                if delta.finish_reason is None:
                    continue
                state.finish()
                choice = ChatCompletionChoice(
                    index=delta.index,
                    message=state.message(),
                    logprobs=chat_logprobs(state.logprobs) if chat.req.logprobs else None,
                    finish_reason=state.finish_reason(delta.finish_reason),
                )
                if delta.stop_reason is not None:
                    choice.stop_reason = delta.stop_reason
                choices[delta.index] = choice
        return CreateChatCompletionResponse(
            id=chat.generation.request_id,
            created=int(time.time()),
            model=self.model_name,
            choices=[c for c in choices if c is not None],
            usage=usage_of(chat.generation.usage),
        )

    async def stream(
        self, chat: ChatRequest
    ) -> AsyncIterator[CreateChatCompletionStreamResponse | bytes]:
        """The chunks of a streamed answer, exactly as OpenAI sends them."""
        opts = StreamSettings.of(chat.req.stream_options)
        generation = chat.generation
        created = int(time.time())
        want_logprobs = bool(chat.req.logprobs)

        def chunk(choice: ChatCompletionChunkChoice | None) -> CreateChatCompletionStreamResponse:
            out = CreateChatCompletionStreamResponse(
                id=generation.request_id,
                created=created,
                model=self.model_name,
                choices=[] if choice is None else [choice],
            )
            if opts.include_usage:
                out.usage = usage_of(generation.usage) if opts.continuous_usage else None
            return out

        # Plain text chunks go out from a template, unless each chunk is different anyway.
        text_event = None
        if not want_logprobs and not opts.continuous_usage:
            text_event = TextEvents(lambda i, t: chunk(_choice(i, ChatCompletionDelta(content=t))))

        states = chat.choices()
        for index in range(len(states)):
            yield chunk(_choice(index, ChatCompletionDelta(role="assistant", content="")))
        async for step in generation:
            for d in step.choices:
                state = states[d.index]
                pending = list(d.logprobs) if want_logprobs and d.logprobs else []
                events = state.feed(d.text)
                if d.finish_reason is not None:
                    events += state.finish()
                for e in events:
                    if text_event is not None and isinstance(e, Content):
                        yield text_event(d.index, e.text)
                        continue
                    out = _choice(d.index, state.delta(e))
                    if want_logprobs and pending:
                        out.logprobs, pending = chat_logprobs(pending), []
                    yield chunk(out)
                if d.finish_reason is not None:
                    done = _choice(d.index, ChatCompletionDelta())
                    done.finish_reason = state.finish_reason(d.finish_reason)
                    if want_logprobs and pending:
                        done.logprobs = chat_logprobs(pending)
                    if d.stop_reason is not None:
                        done.stop_reason = d.stop_reason
                    yield chunk(done)
                elif want_logprobs and pending:
                    # Text held back by the parser: its tokens' logprobs still go out now.
                    out = _choice(d.index, ChatCompletionDelta(content=""))
                    out.logprobs = chat_logprobs(pending)
                    yield chunk(out)
        if opts.include_usage:
            final = chunk(None)
            final.usage = usage_of(generation.usage)
            yield final


def _choice(index: int, delta: ChatCompletionDelta) -> ChatCompletionChunkChoice:
    return ChatCompletionChunkChoice(index=index, delta=delta, logprobs=None, finish_reason=None)
