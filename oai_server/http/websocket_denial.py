"""uvicorn's WebSocket protocol, with a refused handshake counted as complete.

A handshake refused with an HTTP answer (ASGI's `websocket.http.response` extension: the
401 of a request without a key) reaches the client whole, but uvicorn 0.54's default
protocol (`websockets-sansio`) never marks such a handshake done, so each refusal logged
`ERROR uvicorn.error: ASGI callable returned without completing handshake.`: anyone could
fill the log with errors, and alerts on ERROR lines fired on every refused key. Its
`wsproto` protocol does mark it (uvicorn pull request 3138 makes the two agree); until a
release has it, the server runs this one.
"""

from __future__ import annotations

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol


class WebSocketProtocol(WebSocketsSansIOProtocol):
    """`websockets-sansio`, done once the last part of a refusal's body is sent."""

    async def send(self, message: ASGISendEvent) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body"):
            self.handshake_complete = True
