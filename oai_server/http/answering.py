"""Which service answers a request of the core's endpoints: the answering chain.

A feature may answer in the engine's place (the response cache replays an entry) or
watch the answer go by (the store records a chat completion to be kept). The core's
routes do not choose among them: they ask the chain the app built once, in
`oai_server.app`, for the service that answers this request, and answer through it
(`oai_server.http.answer`).
"""

from __future__ import annotations

from typing import Any, Protocol

from starlette.requests import Request

from oai_server.http.answer import GenerationService
from schemas.chat import CreateChatCompletionRequest
from schemas.completions import CreateCompletionRequest
from schemas.embeddings import CreateEmbeddingRequest

ChatAnswerer = GenerationService[CreateChatCompletionRequest, Any, Any]
CompletionsAnswerer = GenerationService[CreateCompletionRequest, Any, Any]
EmbeddingsAnswerer = GenerationService[CreateEmbeddingRequest, Any, Any]


class Answering(Protocol):
    """The service that answers one request, for each endpoint of the core."""

    def chat(self, request: Request, req: CreateChatCompletionRequest) -> ChatAnswerer: ...

    def completions(self, request: Request) -> CompletionsAnswerer: ...

    def embeddings(self, request: Request) -> EmbeddingsAnswerer | None:
        """None: this server serves no embedding model."""
