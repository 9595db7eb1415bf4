"""The answering chain the app builds once: store recording, then the cache, then the service.

A chat completion to be stored is the engine's answer, recorded as it goes out (never
the cache's: the store keeps the answer under the id the client got); any other request
of chat, completions or embeddings goes through the response cache when it is on, else
straight to its service. The core's routes ask this chain (`oai_server.http.answering`)
and never name the features in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from oai_server.cache import ResponseCache
from oai_server.embeddings import EmbeddingService
from oai_server.http.answering import ChatAnswerer, CompletionsAnswerer, EmbeddingsAnswerer
from oai_server.services.chat import ChatService
from oai_server.services.completions import CompletionService
from oai_server.store import StoreService
from schemas.chat import CreateChatCompletionRequest


@dataclass(frozen=True)
class AnsweringChain:
    """Which service answers each request (see the module's docstring)."""

    chat_service: ChatService
    completions_service: CompletionService
    embeddings_service: EmbeddingService | None
    store: StoreService | None
    cache: ResponseCache | None

    def chat(self, request: Request, req: CreateChatCompletionRequest) -> ChatAnswerer:
        if self.store is not None:
            recorded = self.store.recording(request, req, self.chat_service)
            if recorded is not None:
                return recorded
        if self.cache is not None:
            return self.cache.chat(request)
        return self.chat_service

    def completions(self, request: Request) -> CompletionsAnswerer:
        if self.cache is not None:
            return self.cache.completions(request)
        return self.completions_service

    def embeddings(self, request: Request) -> EmbeddingsAnswerer | None:
        if self.cache is not None and self.embeddings_service is not None:
            return self.cache.embeddings(request)
        return self.embeddings_service
