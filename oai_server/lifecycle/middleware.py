"""Count the requests in flight; while draining, answer 503 to new ones and to probes."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from oai_server.error_responses import error_response
from oai_server.errors import EngineDeadError, ServerShuttingDownError
from oai_server.lifecycle.state import Lifecycle, Phase

# Answered even while draining: scrapers keep their view of the drain.
ALWAYS_ANSWERED = frozenset({"/metrics", "/version"})


class LifecycleMiddleware:
    def __init__(self, app: ASGIApp, lifecycle: Lifecycle) -> None:
        self.app = app
        self.lifecycle = lifecycle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in ALWAYS_ANSWERED:
            await self.app(scope, receive, send)
            return
        phase = self.lifecycle.phase
        if phase is not Phase.SERVING and scope["type"] == "http":
            error = (
                EngineDeadError("The engine has stopped; the server is restarting.")
                if phase is Phase.DEAD
                else ServerShuttingDownError("The server is shutting down; retry elsewhere.")
            )
            await error_response(error, scope)(scope, receive, send)
            return
        self.lifecycle.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.lifecycle.leave()
