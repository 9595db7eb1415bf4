"""The edge of every HTTP request: its id, its access-log line, its metrics.

Pure ASGI rather than `BaseHTTPMiddleware`, which would buffer streams and hide
client disconnects from the routes.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oai_server.ids import new_id
from oai_server.observability.context import RequestRecord, current_request
from oai_server.observability.metrics import Metrics
from oai_server.observability.printable import printable

access_logger = logging.getLogger("oai_server.access")
QUIET_ROUTES = frozenset({"/health", "/metrics", "/version"})

REQUEST_ID_HEADER = b"x-request-id"
# A client's id is kept if it is short and plain; anything else is replaced.
_CLIENT_ID = re.compile(rb"[A-Za-z0-9._:\-]{1,128}")
UNMATCHED = "unmatched"


def _request_id(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == REQUEST_ID_HEADER and _CLIENT_ID.fullmatch(value):
            return str(value.decode())
    # 32 hex digits, as a UUID's: the process's stem and a counter, no system call.
    return new_id("", "")


def _route(scope: Scope) -> str:
    """The template of the route that matched (`/v1/models/{model}`): a bounded label set."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED


class ObservabilityMiddleware:
    """Give each request an id (the client's `x-request-id`, else a new one), answer it in
    `x-request-id`, write one access-log line, and count and time it by route.

    A trailing slash is dropped before routing, so `/v1/chat/completions/` answers as
    `/v1/chat/completions` (a redirect would lose a POST's body with many clients).
    """

    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        log_text: bool = False,
        max_log_len: int | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.log_text = log_text
        # `--max-log-len`: the most of a prompt's characters a line shows, as vLLM's log.
        self.max_log_len = max_log_len
        # prometheus_client's labels() validates and locks on every call: children cached.
        self._counted: dict[tuple[str, str, str, str], Any] = {}
        self._timed: dict[tuple[str, str], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if len(path) > 1 and path.endswith("/"):
            scope["path"] = path.rstrip("/") or "/"
            scope["raw_path"] = scope["path"].encode()
        state = scope.setdefault("state", {})
        record = RequestRecord(
            request_id=_request_id(scope),
            scope=scope,
            method=scope.get("method", "WS"),
            path=scope["path"],
        )
        state["request_id"] = record.request_id
        token = current_request.set(record)
        status = 500
        header = (REQUEST_ID_HEADER, record.request_id.encode())

        async def send_and_observe(message: Message) -> None:
            nonlocal status
            if message["type"] in ("http.response.start", "websocket.http.response.start"):
                status = message["status"]
                message["headers"] = [*message.get("headers", []), header]
            elif message["type"] == "websocket.accept":
                status = 101
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        try:
            await self.app(scope, receive, send_and_observe)
        finally:
            current_request.reset(token)
            self._observe(scope, record, status)

    def _observe(self, scope: Scope, record: RequestRecord, status: int) -> None:
        elapsed = time.perf_counter() - record.began
        route = _route(scope)
        key = (route, record.method, str(status), record.model)
        counted = self._counted.get(key)
        if counted is None:
            counted = self._counted[key] = self.metrics.requests.labels(*key)
        counted.inc()
        timed = self._timed.get((route, record.model))
        if timed is None:
            timed = self._timed[(route, record.model)] = self.metrics.latency.labels(
                route, record.model
            )
        timed.observe(elapsed)
        # Probes and scrapes come every few seconds: their lines are for debugging only.
        level = logging.DEBUG if route in QUIET_ROUTES else logging.INFO
        if not access_logger.isEnabledFor(level):
            return
        text = ""
        if self.log_text and record.prompt_text:
            text = f" prompt={record.prompt_text[: self.max_log_len]!r}"
        access_logger.log(
            level,
            'request_id=%s key=%s "%s %s" status=%d duration_ms=%.1f prompt_tokens=%d '
            "completion_tokens=%d finish_reason=%s%s",
            record.request_id,
            record.principal or "-",
            printable(record.method),
            printable(record.path),
            status,
            elapsed * 1000,
            record.prompt_tokens,
            record.completion_tokens,
            ",".join(record.finish_reasons) or "-",
            text,
        )
