"""Count each request against its key's limits and report them on every answer."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oai_server.caller import caller
from oai_server.error_responses import refuse
from oai_server.errors import RateLimitError
from oai_server.http.open_paths import OpenPaths
from oai_server.limits.limiter import RateLimiter
from oai_server.observability.context import current_request
from oai_server.observability.spans import span


class RateLimitMiddleware:
    """429 when the caller's request limit is spent; `x-ratelimit-*` headers on every answer.

    The token limit is taken when a request reaches an engine (the admission step calls
    `RateLimiter.reserve_tokens`) and settled here once the answer is sent.
    """

    def __init__(self, app: ASGIApp, limiter: RateLimiter, is_open: OpenPaths) -> None:
        """`is_open`: the paths counted against no limit (the app's open ones)."""
        self.app = app
        self.limiter = limiter
        self.is_open = is_open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.is_open(scope["path"]):
            await self.app(scope, receive, send)
            return
        principal = caller(scope)
        record = current_request.get()
        try:
            # A WebSocket session counts as one request; its tokens count as they go.
            with span("rate_limit.check"):
                requests = await self.limiter.take_request(principal)
        except RateLimitError as refused:
            await refuse(refused, scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                tokens = await self.limiter.tokens(principal)
                headers = message.get("headers", [])
                extra = requests.raw_headers() if requests is not None else []
                if tokens is not None:
                    extra += tokens.raw_headers()
                # An answer that set its own (a 429 says where the refused limit stands) keeps them.
                present = {name.lower() for name, _ in headers}
                message["headers"] = [
                    *headers,
                    *(header for header in extra if header[0] not in present),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            if record is not None:
                await self.limiter.settle(record)
