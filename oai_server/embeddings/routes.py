"""`POST /v1/embeddings`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.errors import InvalidRequestError
from oai_server.http.answer import json_response
from oai_server.http.parsing import parse_body
from oai_server.state import server_state
from schemas.embeddings import CreateEmbeddingRequest

router = APIRouter()


@router.post("/v1/embeddings")
async def create_embedding(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, CreateEmbeddingRequest, server.settings.max_request_bytes)
    service = server.embeddings
    if service is None:
        server.models.find(req.model, "embedding")  # a 4xx naming the models there are
        raise InvalidRequestError("This server serves no embedding model.", param="model")
    job = service.prepare(req)  # the model checked there, for batch lines as well
    return json_response(await service.create(job))
