"""`POST /v1/embeddings`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from oai_server.errors import InvalidRequestError
from oai_server.http.answer import GenerationService, answer
from oai_server.http.parsing import parse_body
from oai_server.state import server_state
from schemas.embeddings import CreateEmbeddingRequest

router = APIRouter()


@router.post("/v1/embeddings")
async def create_embedding(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, CreateEmbeddingRequest, server.settings.max_request_bytes)
    embeddings = server.embeddings
    if embeddings is None:
        server.models.find(req.model, "embedding")  # a 4xx naming the models there are
        raise InvalidRequestError("This server serves no embedding model.", param="model")
    # Its `prepare` checks the model (so a batch line is refused as this route refuses it).
    service: GenerationService[CreateEmbeddingRequest, Any, Any] = embeddings
    if server.cache is not None:
        service = server.cache.embeddings(request, embeddings)
    return await answer(request, req, service)
