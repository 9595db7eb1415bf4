"""`POST /v1/embeddings`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.errors import InvalidRequestError
from oai_server.http.answer import answer
from oai_server.http.answering import Answering
from oai_server.http.parsing import parse_body
from oai_server.state import server_state
from schemas.embeddings import CreateEmbeddingRequest


def router(answering: Answering) -> APIRouter:
    """The route, answering through `answering` (the app's chain: cache, service)."""
    router = APIRouter()

    @router.post("/v1/embeddings")
    async def create_embedding(request: Request) -> Response:
        server = server_state(request)
        req = await parse_body(request, CreateEmbeddingRequest, server.settings.max_request_bytes)
        # Its `prepare` checks the model (so a batch line is refused as this route refuses it).
        service = answering.embeddings(request)
        if service is None:
            server.models.find(req.model, "embedding")  # a 4xx naming the models there are
            raise InvalidRequestError("This server serves no embedding model.", param="model")
        return await answer(request, req, service)

    return router
