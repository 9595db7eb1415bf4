"""`POST /v1/messages` and `POST /v1/messages/count_tokens`.

A message is answered by the chat service (through the response cache when it is on):
the request is refused, with its HTTP status, before the 200 goes out, and a client
that leaves cancels the engine request, as on every other route.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.routing import BaseRoute

from oai_server.anthropic.sse import Messages
from oai_server.anthropic.translate import chat_request
from oai_server.caller import caller
from oai_server.http.answer import answer, json_response
from oai_server.http.answering import Answering
from oai_server.http.parsing import parse_body
from oai_server.state import ServerState
from schemas.anthropic import CountTokensRequest, CountTokensResponse, MessagesRequest


def routes(core: ServerState, answering: Answering) -> list[BaseRoute]:
    """The two routes, answering through `answering` (the app's chain: the response cache
    when it is on) on `core`'s chat service."""
    router = APIRouter()
    limit = core.settings.max_request_bytes

    @router.post("/v1/messages")
    async def create_message(request: Request) -> Response:
        req = await parse_body(request, MessagesRequest, limit)
        chat = core.for_caller(chat_request(req), caller(request.scope))
        # Streamed as the client asked; the chat answers as a stream either way, which
        # the message's run folds when it is answered whole (`Messages`).
        chat.stream = req.stream
        return await answer(request, chat, answering.chat(request, chat), Messages(req.model))

    @router.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        req = await parse_body(request, CountTokensRequest, limit)
        job = await core.chat.prepare(chat_request(req))
        count = await core.chat.count_prompt_tokens(job)
        return json_response(CountTokensResponse(input_tokens=count))

    return router.routes
