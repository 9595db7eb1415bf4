"""`POST /v1/completions`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.disconnect import until_disconnect
from oai_server.routes.parsing import parse_body
from oai_server.routes.responses import json_response
from oai_server.sse import event_stream
from oai_server.state import server_state
from schemas.completions import CreateCompletionRequest, CreateCompletionResponse

router = APIRouter()


@router.post("/v1/completions")
async def create_completion(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, CreateCompletionRequest, server.settings.max_request_bytes)
    if req.stream:
        return event_stream(server.completions.stream(await server.completions.start(req)))

    async def answer() -> CreateCompletionResponse:
        return await server.completions.complete(await server.completions.start(req))

    return json_response(await until_disconnect(request, answer()))
