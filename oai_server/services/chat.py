"""Chat completions: request in, engine request out, typed events back.

`prepare` validates and converts (every rejection happens there or at the engine's
admission in `start`); `stream` yields the events of the answer exactly as OpenAI
streams them; `complete` is the sum of those same events.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from oai_server.dialects.harmony import HarmonyRequest
from oai_server.dialects.model import ModelDialects
from oai_server.dialects.reasoning.selection import Reasoner
from oai_server.dialects.reasoning.stage import Reasoning
from oai_server.dialects.tool_calls.parsers import CallArguments, Content, ContentOnly
from oai_server.dialects.tool_calls.plan import ToolPlan, plan_tools
from oai_server.engine.protocol import Engine
from oai_server.engine.types import ImageInput, SamplingOptions
from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.generation.chat_template import (
    encode_prompt,
    image_refs,
    prompt_chars,
    render_prompt_text,
    template_kwargs,
)
from oai_server.generation.engine_request import Generation
from oai_server.generation.logprobs import chat_logprobs
from oai_server.generation.offload import INLINE_CHARS, off_loop
from oai_server.generation.prompt_bound import tokens_at_least
from oai_server.generation.sampling import build_options, resolve_max_tokens
from oai_server.generation.work_limits import WorkLimits, check_options_token_ids
from oai_server.ids import new_request_id
from oai_server.media.errors import MediaError
from oai_server.media.loader import ImageLoader, ImageRef
from oai_server.models import ModelRegistry
from oai_server.services.chat_assembler import ChatAssembler
from oai_server.services.chat_choice import ChoiceState
from oai_server.services.chat_chunks import chat_chunk, chat_chunks, choice_of, light_choice
from oai_server.services.common import (
    StreamSettings,
    check_model,
    reject_unsupported,
    structured_output,
    usage_of,
)
from oai_server.services.events import (
    ArgumentsDelta,
    Chunks,
    EventStream,
    Finish,
    Light,
    Opening,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from schemas.chat import (
    ChatCompletionChunkChoice,
    ChatCompletionDelta,
    CreateChatCompletionRequest,
    CreateChatCompletionResponse,
    CreateChatCompletionStreamResponse,
)

ChatEvent = CreateChatCompletionStreamResponse | Light


@dataclass
class ChatJob:
    """A validated chat request, converted into what the engine takes."""

    req: CreateChatCompletionRequest
    prompt_token_ids: list[int]
    options: SamplingOptions
    tools: ToolPlan
    # The rendered prompt the ids encode (what the response cache's key hashes).
    prompt_text: str
    # The model's reasoning parser (--reasoning-parser), if it has one.
    reasoner: Reasoner | None = None
    # A harmony model's (gpt-oss) request: its parser reads thinking, content and calls.
    harmony: HarmonyRequest | None = None

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)


@dataclass
class ChatRequest:
    """A chat job whose generation has started."""

    job: ChatJob
    generation: Generation
    created: int

    @property
    def req(self) -> CreateChatCompletionRequest:
        return self.job.req

    def choices(self, whole: bool = False) -> list[ChoiceState]:
        """A state per choice; `whole`: for an answer not streamed."""
        plan = self.job.tools
        make = plan.make_whole if whole and plan.make_whole is not None else plan.make_parser
        reasoner, show = self.job.reasoner, self.job.req.include_reasoning
        harmony = self.job.harmony
        if harmony is not None:  # its stage reads the calls: the plan's parser is never fed
            make = ContentOnly
        kwargs = None if reasoner is None else template_kwargs(self.req)
        return [
            ChoiceState(
                make(),
                reasoning=None if reasoner is None else reasoner.make(kwargs),
                show_reasoning=show,
                harmony=None if harmony is None else harmony.make(whole),
            )
            for _ in range(self.req.n or 1)
        ]


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
    # Each model's dialect: its tool-call and reasoning parsers, or harmony (None: the
    # settings' defaults, over `engine`).
    dialects: ModelDialects | None = None
    limits: WorkLimits = field(default_factory=WorkLimits)
    # The server's other models, so a request naming one gets the error that says which.
    models: ModelRegistry | None = None
    # Fetches and decodes the images a request names (None: a server without images).
    images: ImageLoader | None = None
    _dialects: ModelDialects = field(init=False)

    def __post_init__(self) -> None:
        self._dialects = self.dialects or ModelDialects(self.engine)

    async def prepare(self, req: CreateChatCompletionRequest, *, load: bool = True) -> ChatJob:
        """Validate `req` and convert it into the engine's prompt and options. `load`
        false: only check what its images can be without fetching or decoding them (a
        batch line, whose images are loaded when it runs); the job has none."""
        target = check_model(req.model, self.model_name, models=self.models)
        # Each model answers with its own tokenizer and template; --chat-template is the
        # first model's.
        engine = self.engine.serving(target.model)
        template = self.chat_template if target.model == self.model_name else None
        reject_unsupported(req)
        dialect = self._dialects.of(target.model)
        tools = plan_tools(req, dialect.tools)
        structured = structured_output(req.response_format)
        if tools.structured is not None:
            structured = tools.structured
        refs = image_refs(req)
        images = await self._images(refs, engine, target.model, load) if refs else ()
        requested: int | None = req.max_completion_tokens
        param = "max_completion_tokens"
        if requested is None:
            requested, param = req.max_tokens, "max_tokens"
        harmony, size = dialect.harmony, prompt_chars(req.messages)
        # gpt-oss's prompt is harmony's, not its template's (as `vllm serve` renders it).
        rendered = None if harmony is None else await off_loop(size, harmony.render, req)
        if rendered is not None:
            text, prompt = rendered.prompt_text, rendered.prompt_token_ids
        else:
            text, prompt = await off_loop(
                size, self._prompt, req, engine, template, tools.template_tools, requested, param
            )
        model = engine.model_info
        max_tokens = resolve_max_tokens(
            requested,
            len(prompt),
            model.max_model_len,
            max_tokens_param=param,
            default=model.sampling_defaults.max_tokens,
            cap=model.sampling_defaults.max_tokens_cap,
            strict=self.limits.strict_max_tokens,
        )
        options = build_options(
            req,
            max_tokens=max_tokens,
            defaults=model.sampling_defaults,
            logprobs=_logprobs_count(req),
            structured=structured,
            adapter=target.adapter,
            model=target.model,
            images=images,
        )
        reasoner = dialect.reasoner
        if tools.keep_special_tokens or (reasoner is not None and reasoner.keep_special_tokens):
            options = dataclasses.replace(options, skip_special_tokens=False)
        self.limits.check_work([prompt], [options], prompt_param="messages")
        check_options_token_ids(options, model.vocab_size)
        return ChatJob(req, prompt, options, tools, text, reasoner, rendered)

    async def count_prompt_tokens(self, job: ChatJob) -> int:
        """`job`'s prompt in tokens as its answer's `usage.prompt_tokens` counts it: each
        image's tokens too (what the token-counting endpoints answer)."""
        engine = self.engine.serving(job.options.model)
        return await engine.count_prompt_tokens(job.prompt_token_ids, job.options.images)

    async def _images(
        self, refs: list[ImageRef], engine: Engine, model: str | None, load: bool
    ) -> tuple[ImageInput, ...]:
        """The request's images, fetched and decoded; a model that takes none, or fewer,
        refuses them by name before anything is fetched."""
        limit = engine.model_info.image_limit
        if not limit or self.images is None:
            raise UnsupportedParameterError(
                f"The model '{model or self.model_name}' does not take images "
                "(image_url content parts).",
                param=refs[0].param,
            )
        if len(refs) > limit:
            raise MediaError(
                f"At most {limit} images may be sent in one request (--limit-mm-per-prompt); "
                f"{refs[limit].param} is one too many.",
                param=refs[limit].param,
            )
        if not load:
            self.images.check(refs)
            return ()
        return tuple(await self.images.load(refs, engine.model_info.image_max_side))

    def _prompt(
        self,
        req: CreateChatCompletionRequest,
        engine: Engine,
        template: str | None,
        tools: list[dict[str, Any]] | None,
        requested: int | None,
        param: str,
    ) -> tuple[str, list[int]]:
        """The rendered prompt and its token ids; a prompt that cannot fit (the context,
        or the server's work limit) is refused before it is tokenized."""
        text = render_prompt_text(req, engine.tokenizer, template, tools)
        model = engine.model_info
        least = 0
        # The bound spares a prompt that cannot fit its tokenizing; one short enough to be
        # tokenized on the loop costs less to count exactly (the floor's prompts, ~700
        # characters, skip the bound's work and its checks).
        if len(text) > INLINE_CHARS and 4 * len(text) >= model.max_model_len:
            least = tokens_at_least(text, model.longest_token_bytes, model.max_model_len)
        if least:
            work = self.limits.least_work(
                least,
                requested,
                req.n or 1,
                model.max_model_len,
                prompt_param="messages",
                max_tokens_param=param,
            )
            self.limits.check_total(work, param="max_tokens", at_least=True)
        return text, encode_prompt(text, engine.tokenizer)

    def describe(self, model: str) -> str:
        """How the chat model `model`'s output is read, for the ready line."""
        return self._dialects.of(model).describe()

    def context_length(self, model: str) -> int:
        """The context length of the chat model (or adapter's base) `model` names."""
        target = check_model(model, self.model_name, models=self.models)
        return self.engine.serving(target.model).model_info.max_model_len

    async def start(self, job: ChatJob, request_id: str | None = None) -> ChatRequest:
        """Hand `job` to the engine; returns once its first step (or refusal) is in."""
        generation = await Generation.start(
            self.engine, request_id or new_request_id("chatcmpl"), job.prompt_token_ids, job.options
        )
        return ChatRequest(job, generation, int(time.time()))

    def stream(self, chat: ChatRequest) -> EventStream[CreateChatCompletionStreamResponse]:
        """The events of the answer, exactly as OpenAI streams them."""
        opts = StreamSettings.of(chat.req.stream_options)
        return EventStream(self._events(chat, opts), self._chunks_of(chat, opts))

    def _chunks_of(
        self, chat: ChatRequest, opts: StreamSettings
    ) -> Chunks[CreateChatCompletionStreamResponse]:
        identity = (chat.generation.request_id, chat.created)
        return self.chunks(identity, chat.req.model, opts, chat.req.service_tier)

    async def complete(self, chat: ChatRequest) -> CreateChatCompletionResponse:
        """The whole answer: the sum of the streamed events."""
        assembler = ChatAssembler(with_logprobs=bool(chat.req.logprobs))
        opts = StreamSettings(True, False)
        chunks = self._chunks_of(chat, opts)
        async for event in self._events(chat, opts, whole=True):
            # The light events carry no identity: the answer's comes with its usage chunk.
            assembler.add(chunks.of(event) if isinstance(event, Usage) else event)
        return assembler.result()

    # How a chunk of an answer is built, live and as the response cache replays it.
    chunks = staticmethod(chat_chunks)

    def _chunk(
        self, chat: ChatRequest, opts: StreamSettings, choice: ChatCompletionChunkChoice | None
    ) -> CreateChatCompletionStreamResponse:
        usage = usage_of(chat.generation.usage) if opts.continuous_usage else None
        return chat_chunk(
            chat.generation.request_id,
            chat.created,
            chat.req.model,
            opts,
            choice,
            usage,
            chat.req.service_tier,
        )

    async def _events(
        self, chat: ChatRequest, opts: StreamSettings, whole: bool = False
    ) -> AsyncIterator[ChatEvent]:
        generation = chat.generation
        want_logprobs = bool(chat.req.logprobs)
        # Plain text goes out as a bare `TextDelta` (thinking a `ReasoningDelta`, a function
        # call's arguments an `ArgumentsDelta`), a choice's
        # opening and plain finish as `Opening` and `Finish`, the usage as the counts, unless
        # each chunk differs anyway.
        light = not want_logprobs and not opts.continuous_usage

        def chunk(choice: ChatCompletionChunkChoice | None) -> CreateChatCompletionStreamResponse:
            return self._chunk(chat, opts, choice)

        states = chat.choices(whole)
        # The commonest stream, plain text: each piece goes out as it comes, no parser events.
        plain = light and all(state.plain for state in states)
        # An `Opening` waits in the encoder for the event after it, to go out in the same
        # write: it is light only where the first step, in hand, brings that event.
        first = generation.first_step
        ready = (
            plain
            and first is not None
            and any(d.text or d.finish_reason is not None for d in first.choices)
        )
        for index in range(len(states)):
            yield Opening(index) if ready else chunk(light_choice(Opening(index)))
        async for step in generation:
            for d in step.choices:
                if plain and d.finish_reason is None:
                    if d.text:
                        yield d  # the engine's delta is a `TextDelta`
                    continue
                state = states[d.index]
                if light and d.finish_reason is None:
                    quiet = state.passing(d)
                    if quiet is not None:
                        yield quiet
                        continue
                pending = list(d.logprobs) if want_logprobs and d.logprobs else []
                events = state.feed(d.text, d.token_ids, d.token_count)
                finish = None
                if d.finish_reason is not None:
                    events += state.finish()
                    # Before anything of this step goes out: a failed request raises here,
                    # so it never reaches the client as an ordinary, truncated answer.
                    finish = state.finish_reason(d.finish_reason)
                for e in events:
                    if light and isinstance(e, Content | Reasoning):
                        yield (TextDelta if type(e) is Content else ReasoningDelta)(d.index, e.text)
                        continue
                    if light and type(e) is CallArguments and not e.custom:
                        yield ArgumentsDelta(d.index, e.index, e.text)
                        continue
                    out = choice_of(d.index, state.delta(e))
                    if pending:
                        out.logprobs, pending = chat_logprobs(pending), []
                    yield chunk(out)
                if finish is not None and light and d.stop_reason is None:
                    yield Finish(d.index, finish)
                elif finish is not None:
                    done = choice_of(d.index, ChatCompletionDelta())
                    done.finish_reason = finish
                    if pending:
                        done.logprobs = chat_logprobs(pending)
                    if d.stop_reason is not None:
                        done.stop_reason = d.stop_reason
                    yield chunk(done)
                elif pending:
                    # Text held back by the parser: its tokens' logprobs still go out now.
                    out = choice_of(d.index, ChatCompletionDelta(content=""))
                    out.logprobs = chat_logprobs(pending)
                    yield chunk(out)
        harmony = chat.job.harmony
        if chat.job.reasoner is not None or (harmony is not None and harmony.reasoning):
            generation.usage.reasoning_tokens = sum(s.reasoning_tokens for s in states)
        if opts.include_usage and generation.usage.reasoning_tokens is not None:
            # A chunk of its own: the light usage's encoding has no reasoning details.
            last = chunk(None)
            last.usage = usage_of(generation.usage)
            yield last
        elif opts.include_usage:
            yield generation.usage  # final now: the engine request has ended
