"""`POST /tokenize` and `POST /detokenize` (vLLM's extensions, outside `/v1` as in vLLM)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.routes.parsing import parse_body
from oai_server.routes.responses import json_response
from oai_server.services.tokenize import TokenizeService
from oai_server.state import ServerState, server_state
from schemas.tokenize import DetokenizeRequest, TokenizeRequest

router = APIRouter()


def _service(server: ServerState) -> TokenizeService:
    return TokenizeService(server.engine, server.settings.model_name, server.chat.chat_template)


@router.post("/tokenize")
async def tokenize(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, TokenizeRequest, server.settings.max_request_bytes)
    return json_response(_service(server).tokenize(req))


@router.post("/detokenize")
async def detokenize(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, DetokenizeRequest, server.settings.max_request_bytes)
    return json_response(_service(server).detokenize(req))
