"""Responses from typed results: JSON bodies, and generation answered streamed or whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, TypeVar

from fastapi import Request, Response

from oai_server.disconnect import until_disconnect
from oai_server.sse import event_stream
from schemas.common import GenerationRequest, ResponseModel

Req = TypeVar("Req", bound=GenerationRequest, contravariant=True)
Handle = TypeVar("Handle")


class GenerationService(Protocol[Req, Handle]):
    """What the chat and completions services both offer."""

    async def start(self, req: Req) -> Handle: ...

    def stream(self, handle: Handle) -> AsyncIterator[ResponseModel | bytes]: ...

    async def complete(self, handle: Handle) -> ResponseModel: ...


def json_response(body: ResponseModel, status_code: int = 200) -> Response:
    return Response(body.to_json(), status_code, media_type="application/json")


async def answer(request: Request, req: Req, service: GenerationService[Req, Handle]) -> Response:
    """Start generating for `req`; stream it, or wait for the whole answer.

    Everything that can be refused is refused in `start`, before any status goes out.
    A client that leaves before a whole answer is ready cancels it, aborting the engine.
    """
    if req.stream:
        return event_stream(service.stream(await service.start(req)))

    async def whole() -> ResponseModel:
        return await service.complete(await service.start(req))

    return json_response(await until_disconnect(request, whole()))
