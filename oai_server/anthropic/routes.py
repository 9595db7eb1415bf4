"""`POST /v1/messages` and `POST /v1/messages/count_tokens`.

A message is answered by the chat service (through the response cache when it is on):
the request is refused, with its HTTP status, before the 200 goes out, and a client
that leaves cancels the engine request, as on every other route.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.routing import BaseRoute

from oai_server.anthropic.sse import MessageStreamResponse
from oai_server.anthropic.stream import MessageRun
from oai_server.anthropic.translate import chat_request
from oai_server.cache.service import CacheJob
from oai_server.caller import caller
from oai_server.http.answer import Shortcut, json_response
from oai_server.http.answering import Answering
from oai_server.http.disconnect import until_disconnect
from oai_server.http.parsing import parse_body
from oai_server.ids import new_id
from oai_server.services.chat import ChatJob
from oai_server.state import ServerState
from schemas.anthropic import CountTokensRequest, CountTokensResponse, Message, MessagesRequest


def _prompt_tokens(job: object) -> int:
    """The prompt's length, for `message_start` (before the engine's counts come)."""
    chat = job.job if isinstance(job, CacheJob) else job
    assert isinstance(chat, ChatJob)
    return len(chat.prompt_token_ids)


def _message_id(request: Request) -> str:
    """`msg_` and the x-request-id, so logs and engine traces meet on one id."""
    request_id: str | None = request.scope.get("state", {}).get("request_id")
    return new_id("msg") if request_id is None else f"msg_{request_id}"


def routes(core: ServerState, answering: Answering) -> list[BaseRoute]:
    """The two routes, answering through `answering` (the app's chain: the response cache
    when it is on) on `core`'s chat service."""
    router = APIRouter()
    limit = core.settings.max_request_bytes

    @router.post("/v1/messages")
    async def create_message(request: Request) -> Response:
        req = await parse_body(request, MessagesRequest, limit)
        chat = core.for_caller(chat_request(req), caller(request.scope))
        service = answering.chat(request, chat)
        job = await service.prepare(chat)
        message_id = _message_id(request)
        run = MessageRun.of(message_id, req.model, _prompt_tokens(job))
        shortcut = service if isinstance(service, Shortcut) else None
        # A stored answer (the response cache's) needs no engine, and no waiting.
        ready = None if shortcut is None else await shortcut.ready(job, message_id)
        handles: list[Any] = [] if ready is None else [ready]

        async def started() -> Any:
            if not handles:
                handles.append(await service.start(job, message_id))
            return handles[0]

        async def whole() -> Message:
            return await run.whole(service.stream(await started()))

        response: Response
        if req.stream:
            handle = await until_disconnect(request, started())
            response = MessageStreamResponse(run.events(service.stream(handle)))
        else:
            response = json_response(await until_disconnect(request, whole()))
        if shortcut is not None:
            response.raw_headers += shortcut.headers(handles[0])  # `x-cache`
        return response

    @router.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        req = await parse_body(request, CountTokensRequest, limit)
        job = await core.chat.prepare(chat_request(req))
        count = await core.chat.count_prompt_tokens(job)
        return json_response(CountTokensResponse(input_tokens=count))

    return router.routes
