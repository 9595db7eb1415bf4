"""`POST /tokenize` and `POST /detokenize` (vLLM's extensions, outside `/v1` as in vLLM)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.http.answer import json_response
from oai_server.http.parsing import parse_body
from oai_server.services.tokenize import TokenizeService
from schemas.tokenize import DetokenizeRequest, TokenizeRequest


def router(service: TokenizeService, max_request_bytes: int) -> APIRouter:
    """The routes, answered by `service`, each body of at most `max_request_bytes`."""
    router = APIRouter()

    @router.post("/tokenize")
    async def tokenize(request: Request) -> Response:
        req = await parse_body(request, TokenizeRequest, max_request_bytes)
        return json_response(await service.tokenize(req))

    @router.post("/detokenize")
    async def detokenize(request: Request) -> Response:
        req = await parse_body(request, DetokenizeRequest, max_request_bytes)
        return json_response(await service.detokenize(req))

    return router
