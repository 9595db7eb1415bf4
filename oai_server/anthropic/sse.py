"""Anthropic's stream as server-sent events: `event: <type>` and `data: {json}`.

The stream has no `[DONE]`: `message_stop` ends it. A `ping` follows `message_start`
and comes again whenever no event has for `PING_INTERVAL_S` (a long prefill, a tool
call the parser holds back): proxies and clients that time an idle connection out see
it alive, as Anthropic's own stream keeps them. One timer task per stream sends those,
not a wait with a timeout per event, which cost more per token than the rest of the
encoding. A failure after the 200 went out is one `error` event in Anthropic's
envelope, the last of the stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from oai_server.anthropic.errors import anthropic_error
from oai_server.anthropic.stream import Event, text_delta
from oai_server.http.disconnect import Disconnect
from oai_server.http.sse import BODY, BODY_SEND, HEADERS
from oai_server.http.templates import cut, json_text
from oai_server.items.stream import TextAdded, TextItem
from schemas.anthropic import MessageStartEvent, PingEvent, StreamEvent

logger = logging.getLogger(__name__)

PING_INTERVAL_S = 10.0


def frame(event: StreamEvent) -> bytes:
    return b"event: " + event.type.encode() + b"\ndata: " + event.to_json() + b"\n\n"


PING = frame(PingEvent())


def _delta_template() -> list[bytes]:
    """A text delta's frame, cut where its index and its text go: the bytes of the typed
    event by construction (a sample serialized with marker values)."""
    index, text = 987654321, "\x00oai-text\x00"
    sample = frame(text_delta(TextAdded(TextItem(index), text, ())))
    parts = cut(sample, [b"%d" % index, json_text(text)])
    assert parts is not None
    return parts


_DELTA_HEAD, _DELTA_MID, _DELTA_TAIL = _delta_template()


def frame_of(event: Event) -> bytes:
    """The bytes of one event; a text delta's spliced into its template."""
    if isinstance(event, TextAdded):
        index = b"%d" % event.item.index
        return _DELTA_HEAD + index + _DELTA_MID + json_text(event.text) + _DELTA_TAIL
    return frame(event)


_RAW_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    *((name.lower().encode(), value.encode()) for name, value in HEADERS.items()),
]


class _Idle:
    """When the stream last sent an event, on the loop's clock."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.since = self.loop.time()

    async def ping(self, send: Send) -> None:
        """Send a ping whenever nothing else has gone out for `PING_INTERVAL_S`."""
        while True:
            await asyncio.sleep(self.since + PING_INTERVAL_S - self.loop.time())
            if self.loop.time() - self.since >= PING_INTERVAL_S:
                self.since = self.loop.time()
                await send({"type": BODY, "body": PING, "more_body": True})


class MessageStreamResponse(Response):
    """`text/event-stream` of one message's events; the client leaving cancels them, and
    so aborts the engine request."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self.events = events
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_RAW_HEADERS)  # a copy: a route may add its own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        disconnect = Disconnect(receive)
        try:
            await disconnect.guard(self._send_events(scope.get(BODY_SEND, send)))
        except ClientDisconnect:
            pass
        finally:
            disconnect.stop()

    async def _send_events(self, send: Send) -> None:
        idle = _Idle()
        pinger = asyncio.create_task(idle.ping(send))
        sending = False
        tail = b""
        try:
            async for event in self.events:
                body = frame_of(event)
                if isinstance(event, MessageStartEvent):
                    body += PING
                idle.since = idle.loop.time()
                sending = True
                await send({"type": BODY, "body": body, "more_body": True})
                sending = False
        except Exception as exc:  # every failure of the answer reaches the client as an event
            if sending:  # the client's side failed, not the answer: nothing to tell it
                raise
            logger.warning("message stream failed after it started: %r", exc)
            tail = frame(anthropic_error(exc)[1])
        finally:
            pinger.cancel()
            await asyncio.wait({pinger})
            await self.events.aclose()
        await send({"type": BODY, "body": tail, "more_body": False})
