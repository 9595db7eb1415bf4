"""Require an API key on every HTTP and WebSocket route but a short, named open list.

Pure ASGI rather than `BaseHTTPMiddleware`, which would buffer streams and hide
client disconnects from the routes.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from oai_server.auth.keys import KeyRing
from oai_server.caller import PRINCIPAL
from oai_server.error_responses import refuse
from oai_server.errors import AuthenticationError
from oai_server.http.open_paths import OpenPaths
from oai_server.observability.spans import span

# A browser cannot set headers on a WebSocket: OpenAI's clients send the key as a
# subprotocol instead, `openai-insecure-api-key.<key>`.
KEY_SUBPROTOCOL = "openai-insecure-api-key."


def bearer_token(scope: Scope) -> bytes | None:
    """The credentials of an `Authorization: Bearer ...` header; the scheme in any case
    (RFC 7235: auth schemes are case-insensitive). Else an `x-api-key` header, where
    Anthropic's clients send the key."""
    api_key = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                return bytes(token.strip())
            return None
        if name == b"x-api-key":
            api_key = bytes(value.strip())
    if api_key is not None:
        return api_key
    for protocol in scope.get("subprotocols", ()) if scope["type"] == "websocket" else ():
        if protocol.startswith(KEY_SUBPROTOCOL):
            return str(protocol).removeprefix(KEY_SUBPROTOCOL).encode()
    return None


class AuthMiddleware:
    """401 in OpenAI's envelope unless the request carries one of `keys`, or its path is
    one of `is_open`'s (the app's open paths: probes, the page).

    Sets `scope["state"]["principal"]` (seen as `request.state.principal`) to the key's
    short id; to None when no keys are configured or the route is open.
    """

    def __init__(self, app: ASGIApp, keys: KeyRing, is_open: OpenPaths) -> None:
        self.app = app
        self.keys = keys
        self.is_open = is_open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state[PRINCIPAL] = None
        if self.keys and not self.is_open(scope["path"]):
            with span("auth.check_key"):
                token = bearer_token(scope)
                principal = None if token is None else self.keys.match(token)
            if principal is None:
                await refuse(AuthenticationError(_MESSAGE), scope, receive, send)
                return
            state[PRINCIPAL] = principal
        await self.app(scope, receive, send)


_MESSAGE = "Incorrect API key provided. Pass it as 'Authorization: Bearer <key>'."
