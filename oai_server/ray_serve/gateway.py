"""The gateway: reads each request so the router can keep conversations on one replica.

Serve's proxy routes on what it has before the body arrives (the replica pulls the body
later), so a router behind it cannot see `prompt_cache_key`, `previous_response_id` or
the prompt. The gateway, a small deployment in front, reads the body, turns it into a
`RouteHint`, and hands scope and body to a replica through a handle whose router is
`CacheAffinityRouter`; the replica runs the request through its app and streams the ASGI
messages back, batched as they queue up. It learns which replica answered each response
id from the answer's first bytes and its `x-replica` header; what it has not seen (it
restarted, or another gateway replica saw it), it reads from the store, where each
replica records itself. A WebSocket on `/v1/responses` is relayed to one replica for its
life (`sockets.py`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

from opentelemetry.trace import Span, Status, StatusCode
from ray.exceptions import RayActorError
from ray.serve.handle import DeploymentHandle, DeploymentResponseGenerator
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oai_server.ray_serve.affinity import ResponseReplicas
from oai_server.ray_serve.recorded import RouteHints
from oai_server.ray_serve.sockets import SOCKET_SCOPE_KEYS, SocketRelay
from oai_server.settings import Settings
from oai_server.store.sql import SQLStore
from oai_server.store.url import async_url
from oai_server.tracing.hop import start_hop
from oai_server.tracing.provider import tracer_provider

logger = logging.getLogger(__name__)

# Tries of a request whose replica dies before answering (one per replica it may meet).
_ATTEMPTS = 3

# What a replica's app needs of the HTTP scope (not the proxy's own entries): a socket's,
# less its subprotocols, and the method.
SCOPE_KEYS = (*(key for key in SOCKET_SCOPE_KEYS if key != "subprotocols"), "method")


class Gateway:
    """Forwards every HTTP request to a replica chosen by `CacheAffinityRouter`."""

    def __init__(
        self, server: DeploymentHandle[Any], replica_header: str, settings: dict[str, Any]
    ) -> None:
        """`settings`: the replicas' given settings; the store's URL resolves on this node."""
        resolved = Settings(**settings)
        self.server = server.options(stream=True, method_name="handle_http")
        self.replica_header = replica_header.encode()
        self.max_bytes = resolved.max_request_bytes
        self.responses = ResponseReplicas()
        # The replicas create and migrate the store; the gateway only reads a column.
        store = SQLStore(async_url(resolved.store_url, resolved.data_dir))
        self.hints = RouteHints(self.responses, store)
        # Tracing on: the gateway's span, the replica's continues it (one trace).
        endpoint = resolved.otlp_traces_endpoint
        self.tracer = None if endpoint is None else tracer_provider(endpoint).get_tracer(__name__)
        self.sockets = SocketRelay(server, self.hints.hint, self.responses)

    def __serve_build_asgi_app__(self) -> ASGIApp:
        return GatewayApp(self)

    async def forward(self, request: Request) -> Response:
        """`request` answered by a replica (Serve's ASGI wrapper owns `__call__`)."""
        scope = {k: request.scope[k] for k in SCOPE_KEYS if k in request.scope}
        if self.tracer is None:
            return await self._forward(request, scope, None)
        span, scope["headers"] = start_hop(
            self.tracer, request.method, request.url.path, scope["headers"]
        )
        try:
            return await self._forward(request, scope, span)
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.end()
            raise

    async def _forward(
        self, request: Request, scope: dict[str, Any], span: Span | None
    ) -> Response:
        """`request` answered by a replica; `span` (tracing on) ends with its body."""
        pieces: list[bytes] = []
        size = 0
        async for piece in request.stream():
            pieces.append(piece)
            size += len(piece)
            if size > self.max_bytes:
                break  # the replica refuses it (413): no need to read further
        body = b"".join(pieces)
        hint = await self.hints.hint(body) if request.method == "POST" else None
        batches, (start, *rest) = await self._start(scope, body, hint)
        headers: list[tuple[bytes, bytes]] = start.get("headers", [])
        replica = next((v.decode() for k, v in headers if k == self.replica_header), "")
        if hint is not None and hint.key is not None and replica:
            self.responses.remember(hint.key, replica)  # its next request finds the cache
        if span is not None:
            span.set_attributes(
                {"oai.replica": replica, "http.response.status_code": start["status"]}
            )
        response = StreamingResponse(self._body(rest, batches, replica, span), start["status"])
        response.raw_headers = list(headers)
        return response

    async def _start(
        self, scope: dict[str, Any], body: bytes, hint: Any
    ) -> tuple[DeploymentResponseGenerator[list[Message]], list[Message]]:
        """The answer's batches of messages and its first batch (status and headers first).

        A replica that died, or is being replaced, before its first message has sent the
        client nothing: the request goes to another replica, as the router now sees it,
        rather than failing (its affinity is lost, never the request).
        """
        for attempt in range(1, _ATTEMPTS + 1):
            # A streaming handle (`stream=True`) answers with a generator.
            batches = cast(
                DeploymentResponseGenerator[list[Message]], self.server.remote(scope, body, hint)
            )
            try:
                return batches, await batches.__anext__()
            except RayActorError:
                if attempt == _ATTEMPTS:
                    raise
                logger.warning("replica gone before answering; request sent again (%d)", attempt)
        raise AssertionError("unreachable")

    async def _body(
        self,
        first: list[Message],
        batches: DeploymentResponseGenerator[list[Message]],
        replica: str,
        span: Span | None,
    ) -> AsyncIterator[bytes]:
        """The body, a write per batch: the messages the replica sent while the previous
        batch travelled go out together, as the client would have read them anyway."""
        learning = True
        try:
            batch = first
            while True:
                chunk = b"".join(message.get("body", b"") for message in batch)
                if learning and chunk:
                    self.responses.learn(chunk, replica)
                    learning = False
                if chunk:
                    yield chunk
                batch = await anext(batches, [])
                if not batch:
                    break
        finally:
            # The client left (or the answer ended): the replica's request ends too.
            with contextlib.suppress(Exception):
                batches.cancel()  # type: ignore[no-untyped-call]
            if span is not None:
                span.end()


class GatewayApp:
    """The gateway as Serve's proxy calls it: HTTP forwarded, a WebSocket relayed.

    An instance with an async `__call__`: uvicorn, which runs it under Serve, takes a
    bound method for an ASGI2 app."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            response = await self.gateway.forward(Request(scope, receive))
            await response(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.gateway.sockets(scope, receive, send)
        elif scope["type"] == "lifespan":  # nothing to start or stop
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
