"""`POST /v1/chat/completions`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.disconnect import until_disconnect
from oai_server.routes.parsing import parse_body
from oai_server.routes.responses import json_response
from oai_server.sse import event_stream
from oai_server.state import server_state
from schemas.chat import CreateChatCompletionRequest, CreateChatCompletionResponse

router = APIRouter()


@router.post("/v1/chat/completions")
async def create_chat_completion(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, CreateChatCompletionRequest, server.settings.max_request_bytes)
    if req.stream:
        return event_stream(server.chat.stream(await server.chat.start(req)))

    async def answer() -> CreateChatCompletionResponse:
        return await server.chat.complete(await server.chat.start(req))

    return json_response(await until_disconnect(request, answer()))
