"""`POST /v1/embeddings`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.errors import InvalidRequestError
from oai_server.http.answer import answer
from oai_server.http.answering import Answering
from oai_server.http.parsing import parse_body
from oai_server.models import ModelRegistry
from schemas.embeddings import CreateEmbeddingRequest


def router(answering: Answering, models: ModelRegistry, max_request_bytes: int) -> APIRouter:
    """The route, answering through `answering` (the app's chain: cache, service) each body
    of at most `max_request_bytes`; without an embedding service, the refusal names the
    `models` there are."""
    router = APIRouter()

    @router.post("/v1/embeddings")
    async def create_embedding(request: Request) -> Response:
        req = await parse_body(request, CreateEmbeddingRequest, max_request_bytes)
        # Its `prepare` checks the model (so a batch line is refused as this route refuses it).
        service = answering.embeddings(request)
        if service is None:
            models.find(req.model, "embedding")  # a 4xx naming the models there are
            raise InvalidRequestError("This server serves no embedding model.", param="model")
        return await answer(request, req, service)

    return router
