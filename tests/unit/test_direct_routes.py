"""The busiest routes answer past Starlette's router, as they would through it."""

from __future__ import annotations

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from oai_server.errors import InvalidRequestError
from oai_server.http.direct import DirectRoutes


async def _fails(request: Request) -> Response:
    raise InvalidRequestError("bad", param="x")


async def _answers(request: Request) -> Response:
    route = request.scope["route"]
    return PlainTextResponse(f"{route.path} {request.method}")


async def _behind(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("router", status_code=404)(scope, receive, send)


def client(app: DirectRoutes) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_an_exact_route_is_answered_and_the_rest_goes_on() -> None:
    app = DirectRoutes(
        _behind, [Route("/a", _answers, methods=["POST"]), Route("/b", _fails, methods=["POST"])]
    )
    async with client(app) as c:
        answered = await c.post("/a")
        assert (answered.status_code, answered.text) == (200, "/a POST")
        assert (await c.get("/a")).text == "router"  # another method: the router's to answer
        assert (await c.post("/a/more")).text == "router"
        failed = await c.post("/b")
        assert failed.status_code == 400
        assert failed.json()["error"]["param"] == "x"


def test_a_route_with_parameters_is_left_to_the_router() -> None:
    with pytest.raises(ValueError, match="parameters"):
        DirectRoutes(_behind, [Route("/v1/{name}", _answers, methods=["POST"])])
