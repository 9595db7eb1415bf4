"""The fast paths past the framework skip no layer that would change an answer.

`BODY_SEND` sends a stream's bodies past every middleware, so each middleware in the app
must pass a stream's start on at once and leave its bodies alone; `DirectRoutes` answers
the busiest routes past Starlette's router, so they must be the routes the router would
pick. (The list of fast paths: `oai_server.http`'s docstring.)
"""

from __future__ import annotations

from typing import Any

from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.routing import Match
from starlette.types import Message, Receive, Scope, Send

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.http.direct import DirectRoutes
from oai_server.settings import Settings

KEY = "sk-fast-paths"
# Every feature that brings middleware: keys, limits, CORS (and the cache, the store).
SETTINGS: dict[str, Any] = {
    "api_key": [KEY],
    "rate_limit_rpm": 1000,
    "rate_limit_tpm": 1_000_000,
    "cors_allow_origins": ["http://page.test"],
    "response_cache": "memory",
}
START: Message = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/event-stream; charset=utf-8")],
}
BODIES = [b"data: " + b"x" * 2000 + b"\n\n", b"data: [DONE]\n\n"]


def _scope() -> Scope:
    """A streamed request that every layer lets through (keyed, from the page's origin),
    and that a compressing layer would compress."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/responses",
        "raw_path": b"/v1/responses",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"authorization", f"Bearer {KEY}".encode()),
            (b"accept-encoding", b"gzip"),
            (b"origin", b"http://page.test"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
        "state": {},
    }


async def passes_streams_untouched(middleware: Middleware) -> bool:
    """Whether `middleware` sends a stream's start on before any body, and its bodies as
    they came: all that a stream whose bodies skip it (`BODY_SEND`) may rely on."""
    sent: list[Message] = []
    start_went_first = False

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal start_went_first
        await send(START)
        start_went_first = [m["type"] for m in sent] == ["http.response.start"]
        for i, body in enumerate(BODIES):
            more = i < len(BODIES) - 1
            await send({"type": "http.response.body", "body": body, "more_body": more})

    async def receive() -> Message:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def server_send(message: Message) -> None:
        sent.append(message)

    app = middleware.cls(route, *middleware.args, **middleware.kwargs)  # type: ignore[call-arg]
    await app(_scope(), receive, server_send)
    bodies = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start_went_first and bodies == b"".join(BODIES)


async def test_every_middleware_of_the_app_passes_a_stream_untouched() -> None:
    app = create_app(Settings(**SETTINGS), FakeEngine())
    layers = [m for m in app.user_middleware if m.cls is not DirectRoutes]
    assert len(layers) >= 5  # CORS, observability, drain, keys, limits
    for middleware in layers:
        assert await passes_streams_untouched(middleware), middleware.cls.__name__


async def test_a_middleware_that_compresses_streams_is_caught() -> None:
    # Starlette's own gzip leaves event streams alone by default; told not to, it holds
    # the start back until a body comes and rewrites the bodies: skipped, it would break.
    gzip = Middleware(GZipMiddleware, minimum_size=0, exclude_content_types=())
    assert not await passes_streams_untouched(gzip)


def test_the_direct_routes_are_those_the_router_would_pick() -> None:
    app = create_app(Settings(**SETTINGS), FakeEngine())
    (direct,) = [m for m in app.user_middleware if m.cls is DirectRoutes]
    routes = direct.kwargs["routes"]
    assert {route.path for route in routes} == {"/v1/chat/completions", "/v1/completions"}
    for route in routes:
        for method in route.methods:
            scope = {"type": "http", "path": route.path, "method": method, "root_path": ""}
            picked = next(r for r in app.router.routes if r.matches(scope)[0] is Match.FULL)
            assert picked is route, (method, route.path)
