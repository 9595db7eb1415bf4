"""`POST /v1/completions`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.http.answer import answer
from oai_server.http.parsing import parse_body
from oai_server.state import server_state
from schemas.completions import CreateCompletionRequest

router = APIRouter()


@router.post("/v1/completions")
async def create_completion(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, CreateCompletionRequest, server.settings.max_request_bytes)
    if server.cache is not None:
        return await server.cache.completions(request, req)
    return await answer(request, req, server.completions)
