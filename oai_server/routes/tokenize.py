"""`POST /tokenize` and `POST /detokenize` (vLLM's extensions, outside `/v1` as in vLLM)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.http.answer import json_response
from oai_server.http.parsing import parse_body
from oai_server.state import server_state
from schemas.tokenize import DetokenizeRequest, TokenizeRequest

router = APIRouter()


@router.post("/tokenize")
async def tokenize(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, TokenizeRequest, server.settings.max_request_bytes)
    return json_response(await server.tokenize.tokenize(req))


@router.post("/detokenize")
async def detokenize(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, DetokenizeRequest, server.settings.max_request_bytes)
    return json_response(await server.tokenize.detokenize(req))
