"""The endpoints a batch may name, each answering its lines through its live route's service.

`ServiceEndpoint` wraps a service of the one answer path (chat, completions, embeddings):
its `prepare` refuses a body as the live route does. `ResponsesEndpoint` builds, for the
batch's owner, the same `ResponsesService` as `POST /v1/responses`, whose `prepare` reads
the store (`previous_response_id`, `conversation`), hence an async `check`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from typing import Any

from oai_server.errors import InvalidRequestError
from oai_server.http.answer import GenerationService
from oai_server.responses.service import ResponsesService
from oai_server.responses.state import ResponseState
from oai_server.secret import ServerSecret
from oai_server.services.chat import ChatService
from oai_server.store.service import StoreService
from schemas.chat import CreateChatCompletionRequest
from schemas.common import GenerationRequest, RequestModel, ResponseModel
from schemas.responses import CreateResponse

# A batch line's body, as its endpoint's schema reads it: a request of the endpoint's API
# (a feature above this one brings its own endpoint, and its own schema).
Body = RequestModel


class Endpoint(ABC):
    """One endpoint of the Batch API: the schema its lines' bodies are read with, and its
    live route's refusals and answers, for the batch's owner ("" without keys)."""

    schema: type[Body]
    # Whether its lines run on the chat engine, beside interactive chat requests.
    shares_chat_engine = True

    @abstractmethod
    async def check(self, body: Any, owner: str) -> None:
        """Raise what the live route refuses `body` with; return if it would answer it."""

    @abstractmethod
    async def answer(self, body: Any, owner: str, priority: int | None) -> ResponseModel:
        """The live route's whole answer to `body` (`priority`: the engine's, if set)."""


class ServiceEndpoint(Endpoint):
    """Chat, completions or embeddings: the owner is in the body already (its salt)."""

    def __init__(
        self,
        schema: type[Body],
        service: GenerationService[Any, Any, Any],
        *,
        shares_chat_engine: bool = True,
    ) -> None:
        self.schema = schema
        self.service = service
        self.shares_chat_engine = shares_chat_engine

    async def check(self, body: Any, owner: str) -> None:
        await self.service.prepare(body)

    async def answer(self, body: Any, owner: str, priority: int | None) -> ResponseModel:
        # Embeddings run on their own engine, which has no priorities.
        if priority is not None and isinstance(body, GenerationRequest):
            body = body.model_copy(update={"priority": priority})
        handle = await self.service.start(await self.service.prepare(body))
        return await self.service.complete(handle)


class ChatEndpoint(ServiceEndpoint):
    """`/v1/chat/completions`: a line's images are fetched and decoded when it runs, not
    all of a batch's at its creation."""

    def __init__(self, chat: ChatService) -> None:
        super().__init__(CreateChatCompletionRequest, chat)
        self.chat = chat

    async def check(self, body: Any, owner: str) -> None:
        await self.chat.prepare(body, load=False)


class ResponsesEndpoint(Endpoint):
    """`/v1/responses`: its context read, and its response stored, as the owner's own."""

    schema = CreateResponse

    def __init__(self, chat: ChatService, store: StoreService, secret: ServerSecret) -> None:
        self.chat = chat
        self.store = store
        self.secret = secret

    def _service(self, owner: str) -> ResponsesService:
        return ResponsesService(self.chat, ResponseState(self.store, owner), self.secret)

    async def check(self, body: Any, owner: str) -> None:
        if body.background:
            # The line is answered whole in the output file: nothing to poll for.
            raise InvalidRequestError(
                "A batch line cannot be a 'background' response.", param="background"
            )
        # Its images are fetched when the line runs, not all of a batch's at its creation.
        await self._service(owner).prepare(body, load=False)

    async def answer(self, body: Any, owner: str, priority: int | None) -> ResponseModel:
        service = self._service(owner)
        job = await service.prepare(body)
        if priority is not None:
            # A Responses request has no `priority` field: its chat job's options carry it.
            job.chat.options = dataclasses.replace(job.chat.options, priority=priority)
        return await service.complete(job)
