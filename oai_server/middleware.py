"""ASGI middleware: API-key check and request metrics.

Pure ASGI rather than `BaseHTTPMiddleware`, which would buffer streams and hide
client disconnects from the routes.
"""

from __future__ import annotations

import hmac
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oai_server.error_responses import error_response
from oai_server.errors import AuthenticationError
from oai_server.metrics import Metrics

PROTECTED_PREFIX = "/v1/"
KNOWN_ROUTES = frozenset(
    {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/tokenize", "/detokenize"}
)


def _route_label(path: str) -> str:
    """A bounded set of labels: unknown paths must not grow the metric without end."""
    if path in KNOWN_ROUTES:
        return path
    return "/v1/models/{model}" if path.startswith("/v1/models/") else "other"


class APIKeyMiddleware:
    """Require `Authorization: Bearer <key>` on `/v1/*`; health and metrics stay open."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PROTECTED_PREFIX):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                error = AuthenticationError(
                    "Incorrect API key provided. Pass it as 'Authorization: Bearer <key>'."
                )
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class MetricsMiddleware:
    """Count requests by route and status, and time them to the end of the body."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500

        async def send_and_observe(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_observe)
        finally:
            route = _route_label(scope["path"])
            self.metrics.requests.labels(route, str(status)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - began)
