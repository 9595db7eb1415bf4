"""What differs between chat and text completions, as far as the cache is concerned
(embeddings, answered whole only, are in `cache.embeddings`).

Each endpoint says what of a prepared job goes into the key, how usage and the id are
read from a started request, and how events fold into the whole response (with the
service's own assembler, as the service itself does). A replayed chunk is built by the
service itself (`text_chunk`, `chunk`), so it is the chunk a live answer sends.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from oai_server.cache.key import determined, options_material
from oai_server.engine.types import SamplingOptions
from oai_server.http.answer import Asked, GenerationService
from oai_server.ids import new_request_id
from oai_server.services.chat import ChatJob, ChatRequest, ChatService
from oai_server.services.chat_assembler import ChatAssembler
from oai_server.services.common import StreamSettings
from oai_server.services.completion_assembler import CompletionAssembler
from oai_server.services.completion_batch import Batch, CompletionJob
from oai_server.services.completions import CompletionService
from oai_server.services.events import (
    ArgumentsDelta,
    Chunks,
    Finish,
    Light,
    Opening,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from schemas.chat import (
    CreateChatCompletionRequest,
    CreateChatCompletionStreamResponse,
    NamedToolChoice,
)
from schemas.common import CompletionUsage, GenerationRequest, ResponseModel
from schemas.completions import CreateCompletionRequest, CreateCompletionResponse

Req = TypeVar("Req", bound=Asked)
Job = TypeVar("Job")
Handle = TypeVar("Handle")
Event = Light | ResponseModel
# The stream settings of a chunk that carries the answer's usage.
WITH_USAGE = StreamSettings(include_usage=True, continuous_usage=False)


class Endpoint(ABC, Generic[Req, Job, Handle]):
    """One endpoint's part in caching: what every endpoint has (an answer streamed from
    the cache is `Streamed`'s part)."""

    kind: str
    id_prefix: str
    service: GenerationService[Req, Job, Handle]

    @abstractmethod
    def cacheable(self, req: Req, job: Job) -> bool:
        """True when the answer may come from the cache."""

    @abstractmethod
    def prompts(self, job: Job) -> Sequence[list[int] | str]:
        """The prompts as the engine gets them: their token ids, or the text those encode
        (a rendered chat prompt: the same text makes the same ids, and costs less to hash)."""

    @abstractmethod
    def key_material(self, req: Req, job: Job) -> dict[str, Any]:
        """Everything else that shapes the answer."""

    @abstractmethod
    def usage(self, handle: Handle) -> Usage:
        """The token counts of a started request, once it has finished."""

    @abstractmethod
    def identity(self, handle: Handle) -> tuple[str, int]:
        """The `id` and `created` of a started request's answer."""

    @abstractmethod
    def assemble(
        self, req: Req, events: Sequence[Event], usage: Usage, id_: str, created: int
    ) -> ResponseModel:
        """The whole response the events add up to."""

    def whole_only(self, job: Job) -> bool:
        """True when the service answers only whole (never streamed) for `job`."""
        return False

    def whole_events(self, whole: ResponseModel) -> list[Event]:
        """A whole answer (of a `whole_only` job) as events."""
        raise NotImplementedError

    def whole_usage(self, whole: ResponseModel) -> Usage | None:
        """The token counts of a whole answer (of a `whole_only` job); None when it has none."""
        usage: CompletionUsage | None = getattr(whole, "usage", None)
        if usage is None:
            return None
        details = usage.prompt_tokens_details
        cached = details.cached_tokens if details is not None else 0
        return Usage(usage.prompt_tokens, usage.completion_tokens, cached)

    @abstractmethod
    def restore(self, stored: dict[str, Any]) -> ResponseModel:
        """A stored event (a chunk, an embedding) as the model it was."""

    def fresh_identity(self, request_id: str | None) -> tuple[str, int]:
        """The `id` and `created` of an answer replayed from the cache: its own, as new
        as a miss's (from the request's x-request-id when there is one)."""
        return request_id or new_request_id(self.id_prefix), int(time.time())


class Streamed(Endpoint[Req, Job, Handle]):
    """An endpoint whose answers stream (chat, text completions): sampled, so cacheable
    only when determined, and replayed as the chunks the service makes."""

    chunk_model: type[ResponseModel]

    @abstractmethod
    def options(self, job: Job) -> Sequence[SamplingOptions]: ...

    def cacheable(self, req: Req, job: Job) -> bool:
        """True when the answer is determined, and a stream that reports usage on every
        chunk is not asked for (an entry has no such chunks)."""
        assert isinstance(req, GenerationRequest)
        continuous = StreamSettings.of(req.stream_options).continuous_usage
        return determined(self.options(job)) and not continuous

    @abstractmethod
    def chunks(
        self,
        identity: tuple[str, int],
        model: str,
        opts: StreamSettings,
        service_tier: str | None = None,
    ) -> Chunks[ResponseModel]:
        """How the light events of the answer `identity` of `model` become chunks, as the
        service makes them."""

    def restore(self, stored: dict[str, Any]) -> ResponseModel:
        """A stored chunk as the model it was; its `id` and `created` are a replay's."""
        return self.chunk_model.model_validate({**stored, "id": "", "created": 0})


class ChatEndpoint(Streamed[CreateChatCompletionRequest, ChatJob, ChatRequest]):
    kind = "chat"
    id_prefix = "chatcmpl"
    chunk_model = CreateChatCompletionStreamResponse
    service: ChatService

    def __init__(self, service: ChatService) -> None:
        self.service = service

    def options(self, job: ChatJob) -> Sequence[SamplingOptions]:
        return (job.options,)

    def prompts(self, job: ChatJob) -> Sequence[list[int] | str]:
        return [job.prompt_text]

    def key_material(self, req: CreateChatCompletionRequest, job: ChatJob) -> dict[str, Any]:
        tools = req.tools or []
        choice: Any = req.tool_choice if req.tool_choice is not None else None
        if choice is None:
            choice = "auto" if tools else "none"
        elif isinstance(choice, NamedToolChoice):
            choice = {"function": choice.function.name}
        return {
            # The name asked for: the base model's, or an adapter's.
            "model": req.model,
            "options": options_material(job.options),
            # The template may leave tools out of the prompt; they still shape the answer.
            "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools],
            "tool_choice": choice,
            "parallel_tool_calls": req.parallel_tool_calls is not False,
            "tool_parser": job.tools.parser,
            # The thinking's split, and whether it is sent, shape the answer as much.
            "reasoning_parser": None if job.reasoner is None else job.reasoner.name,
            "include_reasoning": req.include_reasoning,
            "logprobs": bool(req.logprobs),
            # Echoed on every chunk: an answer served at one tier is not replayed for another.
            "service_tier": req.service_tier,
        }

    def usage(self, handle: ChatRequest) -> Usage:
        return handle.generation.usage

    def identity(self, handle: ChatRequest) -> tuple[str, int]:
        return handle.generation.request_id, handle.created

    def chunks(
        self,
        identity: tuple[str, int],
        model: str,
        opts: StreamSettings,
        service_tier: str | None = None,
    ) -> Chunks[ResponseModel]:
        return self.service.chunks(identity, model, opts, service_tier)

    def assemble(
        self,
        req: CreateChatCompletionRequest,
        events: Sequence[Event],
        usage: Usage,
        id_: str,
        created: int,
    ) -> ResponseModel:
        assembler = ChatAssembler(with_logprobs=bool(req.logprobs))
        for event in events:
            assert isinstance(
                event,
                TextDelta
                | ReasoningDelta
                | ArgumentsDelta
                | Opening
                | Finish
                | CreateChatCompletionStreamResponse,
            )
            assembler.add(event)
        # The light events carry no identity: the answer's comes with its usage chunk.
        last = self.chunks((id_, created), req.model, WITH_USAGE, req.service_tier).of(usage)
        assembler.add(last)  # type: ignore[arg-type]
        return assembler.result()


class CompletionsEndpoint(Streamed[CreateCompletionRequest, CompletionJob, Batch]):
    kind = "completions"
    id_prefix = "cmpl"
    chunk_model = CreateCompletionResponse
    service: CompletionService

    def __init__(self, service: CompletionService) -> None:
        self.service = service

    def options(self, job: CompletionJob) -> Sequence[SamplingOptions]:
        return job.options

    def prompts(self, job: CompletionJob) -> Sequence[list[int] | str]:
        return job.prompts

    def key_material(self, req: CreateCompletionRequest, job: CompletionJob) -> dict[str, Any]:
        return {
            # The name asked for: the base model's, or an adapter's.
            "model": req.model,
            "options": [options_material(o) for o in job.options],
            "n": job.n,
            "echo": bool(req.echo),
            "logprobs": req.logprobs,
            "score_only": job.score_only,
        }

    def usage(self, handle: Batch) -> Usage:
        return handle.usage()

    def identity(self, handle: Batch) -> tuple[str, int]:
        return handle.id, handle.created

    def chunks(
        self,
        identity: tuple[str, int],
        model: str,
        opts: StreamSettings,
        service_tier: str | None = None,
    ) -> Chunks[ResponseModel]:
        return self.service.chunks(identity, model, opts)

    def assemble(
        self,
        req: CreateCompletionRequest,
        events: Sequence[Event],
        usage: Usage,
        id_: str,
        created: int,
    ) -> ResponseModel:
        assembler = CompletionAssembler(with_logprobs=req.logprobs is not None)
        for event in events:
            assert isinstance(event, TextDelta | CreateCompletionResponse)
            assembler.add(event)
        assembler.add(usage)
        return assembler.result(id_, created, req.model)

    def whole_only(self, job: CompletionJob) -> bool:
        # `best_of` ranks whole samples, so the service answers it whole, never as a stream.
        return job.samples > job.n

    def whole_events(self, whole: ResponseModel) -> list[Event]:
        """A whole answer as events: one chunk per choice."""
        assert isinstance(whole, CreateCompletionResponse)
        return [
            CreateCompletionResponse(
                id=whole.id, created=whole.created, model=whole.model, choices=[choice]
            )
            for choice in whole.choices
        ]
