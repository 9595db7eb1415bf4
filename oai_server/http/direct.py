"""The busiest routes, answered without Starlette's routing and exception layers.

Between the app's own middleware and a route, Starlette puts its exception middleware,
FastAPI its exit-stack middleware (for uploaded files), then the router, which tries the
routes in turn, and the route's wrapper, which looks the exception handlers up again:
together about a seventh of the server's own work on a streamed chat request.
`DirectRoutes` sits innermost in the app's middleware and answers a plain route of an
exact path itself (`POST /v1/chat/completions`, `POST /v1/completions`), turning what its
handler raises into the response the installed handlers give (`exception_response`);
every other request goes on through Starlette as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from oai_server.error_responses import exception_response


class DirectRoutes:
    def __init__(self, app: ASGIApp, routes: Sequence[Route]) -> None:
        """`routes`: plain Starlette routes of exact paths (no parameters)."""
        self.app = app
        self._routes: dict[tuple[str, str], Route] = {}
        for route in routes:
            if route.param_convertors:
                raise ValueError(f"{route.path} has parameters: it needs the router")
            for method in route.methods or ():
                self._routes[(method, route.path)] = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = None
        if scope["type"] == "http":
            route = self._routes.get((scope["method"], scope["path"]))
        if route is None:
            await self.app(scope, receive, send)
            return
        # What the router records of the route it matched (the metrics' route label).
        scope["route"], scope["endpoint"], scope["path_params"] = route, route.endpoint, {}
        request = Request(scope, receive, send)
        response: Response
        try:
            response = await route.endpoint(request)
        except Exception as exc:  # noqa: BLE001 - every error becomes its response
            response = exception_response(exc)
        await response(scope, receive, send)
