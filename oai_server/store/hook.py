"""Where chat completions reach the store: one wrapper around the chat service.

`recording(request, req, service)` checks the request's `metadata` (OpenAI's limits hold
whether or not it is stored) and, when the answer is to be stored (`store: true`, or the
operator's `store_all`), returns the service wrapped so that each finished answer is
queued for storing: a whole answer as returned, a streamed one folded from the chunks
the client got. An answer that does not finish (the client left mid-stream or before a
whole answer was ready, or generation failed) is not stored, only counted
(`oai_store_incomplete_total`): OpenAI stores completions, not fragments.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import Request

from oai_server.services.chat import ChatRequest, ChatService
from oai_server.store.assemble import ChatAssembler
from oai_server.store.limits import check_metadata
from oai_server.store.routes import owner_of
from oai_server.store.service import StoreService
from schemas.chat import (
    CreateChatCompletionRequest,
    CreateChatCompletionResponse,
    CreateChatCompletionStreamResponse,
)


@dataclass
class RecordingChat:
    """The chat service, storing what it answers."""

    service: ChatService
    store: StoreService
    owner: str

    async def start(self, req: CreateChatCompletionRequest) -> ChatRequest:
        return await self.service.start(req)

    async def complete(self, chat: ChatRequest) -> CreateChatCompletionResponse:
        try:
            response = await self.service.complete(chat)
        except BaseException:
            self.store.metrics.incomplete.inc()
            raise
        self.store.record(chat.req, response, self.owner)
        return response

    async def stream(
        self, chat: ChatRequest
    ) -> AsyncIterator[CreateChatCompletionStreamResponse | bytes]:
        assembler = ChatAssembler()
        finished = False
        try:
            async for chunk in self.service.stream(chat):
                assembler.feed(chunk)
                yield chunk
            finished = True
        finally:
            response = assembler.response() if finished else None
            if response is None:
                self.store.metrics.incomplete.inc()
            else:
                self.store.record(chat.req, response, self.owner)


def recording(
    request: Request, req: CreateChatCompletionRequest, service: ChatService
) -> ChatService | RecordingChat:
    """`service`, wrapped to store its answers if `req` is to be stored."""
    check_metadata(req.metadata)
    store: StoreService | None = getattr(request.app.state, "store", None)
    if store is None or not store.wants(req):
        return service
    return RecordingChat(service, store, owner_of(request))
