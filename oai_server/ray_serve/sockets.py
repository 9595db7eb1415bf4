"""WebSocket mode through the gateway: one socket relayed to one replica for its life.

A deployment handle carries a call's arguments one way and its answer, streamed, the
other: no handle call is a two-way stream. So the gateway accepts the client's socket
itself, reads its first `response.create` (whose `previous_response_id`, cache key or
prompt choose the replica, as an HTTP request's body does), and opens the session on a
replica with a streaming call (`Sessions.open`): the replica runs its app on a
WebSocket scope, whose handshake (keys, limits) and turns are the app's, and streams
back what the app sends. Each later client message reaches that session by a call of its
own (`Sessions.deliver`) whose hint pins it to the same replica (`RouteHint.pinned`).
Closing either way ends both: the client's disconnect cancels the session's call, and
the replica's app reads a disconnect (its turn in progress, and so the engine request,
is cancelled).

The gateway has accepted the socket before the replica's handshake runs, so a socket
the replica refuses (no key: 401; a spent limit: 429) gets the refusal as an error event
with its status, then a close (1008), instead of an HTTP status before the upgrade.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

from ray.serve.handle import DeploymentHandle, DeploymentResponseGenerator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oai_server.ray_serve.affinity import ResponseReplicas, RouteHint

logger = logging.getLogger(__name__)

# The one path a socket may be relayed on (Realtime needs Serve's default router).
SOCKET_PATH = "/v1/responses"
# What a replica's app needs of the WebSocket scope; the denial extension lets its
# handshake refuse with a status the gateway can pass on.
SOCKET_SCOPE_KEYS = (
    "type",
    "asgi",
    "http_version",
    "scheme",
    "path",
    "raw_path",
    "root_path",
    "query_string",
    "headers",
    "client",
    "server",
    "subprotocols",
)
# The first item a session streams back: which replica holds it.
REPLICA_MESSAGE = "oai.replica"
POLICY_VIOLATION = 1008
INTERNAL_ERROR = 1011
# A replica's app takes this long at most to end a turn after its client left.
_WIND_DOWN_S = 5.0


class Sessions:
    """A replica's relayed sockets: each one's queue of client messages, by session id."""

    def __init__(self, replica: str) -> None:
        self.replica = replica
        self._incoming: dict[str, asyncio.Queue[Message]] = {}

    async def open(
        self, app: ASGIApp, session: str, scope: Scope, first: Message
    ) -> AsyncIterator[list[Message]]:
        """Run `app` on the socket `scope` whose handshake is done and whose first client
        message is `first`: the replica's id, then what the app sends, in batches."""
        incoming: asyncio.Queue[Message] = asyncio.Queue()
        incoming.put_nowait({"type": "websocket.connect"})
        incoming.put_nowait(first)
        self._incoming[session] = incoming
        sent: asyncio.Queue[Message | None] = asyncio.Queue()
        scope = {**scope, "extensions": {"websocket.http.response": {}}}

        async def run() -> None:
            try:
                await app(scope, incoming.get, sent.put)
            finally:
                sent.put_nowait(None)

        task = asyncio.create_task(run())
        try:
            yield [{"type": REPLICA_MESSAGE, "replica": self.replica}]
            while (message := await sent.get()) is not None:
                batch = [message]
                while not sent.empty() and (message := sent.get_nowait()) is not None:
                    batch.append(message)
                yield batch
                if message is None:
                    break
        finally:
            # The client left (the gateway cancelled this call) or the app ended: the app
            # reads a disconnect, so its turn in progress ends and aborts its engine request.
            del self._incoming[session]
            incoming.put_nowait({"type": "websocket.disconnect", "code": 1001})
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task), _WIND_DOWN_S)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def deliver(self, session: str, message: Message) -> bool:
        """Hand a client message to its session; False if the session has ended."""
        incoming = self._incoming.get(session)
        if incoming is None:
            return False
        incoming.put_nowait(message)
        return True


Hinter = Callable[[bytes], Awaitable[RouteHint]]


class SocketRelay:
    """The gateway's side: each client socket relayed to one replica's session."""

    def __init__(
        self, server: DeploymentHandle[Any], hint: Hinter, responses: ResponseReplicas
    ) -> None:
        self.open = server.options(stream=True, method_name="open_socket")
        self.deliver = server.options(method_name="deliver_socket")
        self.hint = hint
        self.responses = responses

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await receive()  # websocket.connect
        if scope["path"] != SOCKET_PATH:
            # A close before accepting: the client sees 403.
            await send({"type": "websocket.close", "code": POLICY_VIOLATION})
            return
        await send({"type": "websocket.accept"})
        first = await receive()
        if first["type"] == "websocket.disconnect":
            return
        text = first.get("text") or (first.get("bytes") or b"").decode(errors="replace")
        session = uuid.uuid4().hex
        relayed = {k: scope[k] for k in SOCKET_SCOPE_KEYS if k in scope}
        sent = cast(
            DeploymentResponseGenerator[list[Message]],
            self.open.remote(session, relayed, first, await self.hint(text.encode())),
        )
        try:
            await self._relay(sent, session, receive, send)
        except Exception:
            # The replica died, or its app failed: the client gets a close, not a cut.
            logger.exception("relayed socket %s failed", session)
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": INTERNAL_ERROR})
        finally:
            with contextlib.suppress(Exception):
                sent.cancel()  # type: ignore[no-untyped-call]

    async def _relay(
        self,
        sent: DeploymentResponseGenerator[list[Message]],
        session: str,
        receive: Receive,
        send: Send,
    ) -> None:
        """Both ways at once, until either side ends."""
        (opened,) = await sent.__anext__()
        pinned = RouteHint(replica=opened["replica"], pinned=True)
        down = asyncio.create_task(self._down(sent, send, opened["replica"]))
        up = asyncio.create_task(self._up(receive, session, pinned))
        done, _ = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
        for task in (down, up):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for task in done:
            task.result()  # a relay that failed (not one that was cancelled) says why

    async def _up(self, receive: Receive, session: str, pinned: RouteHint) -> None:
        """The client's messages to the session, in order, until the client leaves."""
        while (message := await receive())["type"] == "websocket.receive":
            if not await self.deliver.remote(session, message, pinned):
                return  # the session ended on the replica

    async def _down(
        self, sent: DeploymentResponseGenerator[list[Message]], send: Send, replica: str
    ) -> None:
        """The session's messages to the client, until the replica's app closes."""
        status, body = 403, b""
        async for batch in sent:
            for message in batch:
                kind = message["type"]
                if kind == "websocket.send":
                    text = message.get("text")
                    if text is not None and '"response.created"' in text[:64]:
                        self.responses.learn(text.encode(), replica)  # for later turns
                    await send(message)
                elif kind == "websocket.close":
                    await send(message)
                    return
                elif kind == "websocket.http.response.start":
                    status = message["status"]
                elif kind == "websocket.http.response.body":
                    body += message.get("body", b"")
                    if not message.get("more_body"):
                        await send({"type": "websocket.send", "text": refusal(status, body)})
                        await send({"type": "websocket.close", "code": POLICY_VIOLATION})
                        return


def refusal(status: int, body: bytes) -> str:
    """The replica's handshake refusal (its status and error body), as the WebSocket error
    event, on a socket the gateway has accepted. Its `code` is never null, as the
    socket's own error events (`websocket.ws_error`)."""
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        error = {"type": "server_error", "code": None, "message": "Refused.", "param": None}
    error["code"] = error.get("code") or error.get("type")
    return json.dumps({"type": "error", "status": status, "error": error})
