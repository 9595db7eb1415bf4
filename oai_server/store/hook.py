"""Where chat completions reach the store: one wrapper around the chat service.

`StoreService.recording(request, req, service)`, when the answer is to be stored
(`store: true`, or the operator's `store_all`), returns the service wrapped so that each
finished answer is queued for storing: a whole answer as returned, a streamed one folded
from the chunks the client got (else None: the route answers with the plain or cached
service). An answer that does not finish (the client left mid-stream or before a whole
answer was ready, or generation failed) is not stored, only counted
(`oai_store_incomplete_total`): OpenAI stores completions, not fragments.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from oai_server.services.chat import ChatEvent, ChatJob, ChatRequest, ChatService
from oai_server.services.chat_assembler import ChatAssembler
from oai_server.services.common import usage_of
from oai_server.services.events import EventStream, Opening
from schemas.chat import (
    CreateChatCompletionRequest,
    CreateChatCompletionResponse,
    CreateChatCompletionStreamResponse,
)


class Recorder(Protocol):
    """Where finished answers go (the store's service): queued, or counted as incomplete."""

    def record(
        self,
        req: CreateChatCompletionRequest,
        response: CreateChatCompletionResponse,
        owner: str | None,
    ) -> None: ...

    def incomplete(self) -> None: ...


@dataclass
class RecordingChat:
    """The chat service, storing what it answers."""

    service: ChatService
    store: Recorder
    owner: str

    async def prepare(self, req: CreateChatCompletionRequest) -> ChatJob:
        return await self.service.prepare(req)

    async def start(self, job: ChatJob, request_id: str | None = None) -> ChatRequest:
        return await self.service.start(job, request_id)

    async def complete(self, chat: ChatRequest) -> CreateChatCompletionResponse:
        try:
            response = await self.service.complete(chat)
        except BaseException:
            self.store.incomplete()
            raise
        self.store.record(chat.req, response, self.owner)
        return response

    def stream(self, chat: ChatRequest) -> EventStream[CreateChatCompletionStreamResponse]:
        inner = self.service.stream(chat)
        return EventStream(self._recorded(chat, inner), inner.chunks)

    async def _recorded(
        self, chat: ChatRequest, inner: EventStream[CreateChatCompletionStreamResponse]
    ) -> AsyncIterator[ChatEvent]:
        # The stored answer is the fold of exactly the events the client got.
        assembler = ChatAssembler(with_logprobs=bool(chat.req.logprobs))
        finished = False
        try:
            async for event in inner:
                # The record's `id` is its first chunk's: an opening, as the chunk it stands for.
                assembler.add(inner.chunks.of(event) if isinstance(event, Opening) else event)
                yield event
            finished = True
        finally:
            if finished:
                response = assembler.result()
                if response.usage is None:
                    response.usage = usage_of(chat.generation.usage)
                self.store.record(chat.req, response, self.owner)
            else:
                self.store.incomplete()
