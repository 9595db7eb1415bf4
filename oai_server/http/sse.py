"""Server-sent events framing, as OpenAI streams: `data: {json}\\n\\n` ... `data: [DONE]\\n\\n`."""

from __future__ import annotations

import logging

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from oai_server.error_responses import error_body, to_openai_error
from oai_server.http.disconnect import Disconnect
from oai_server.http.templates import LightEvents, event, json_text
from oai_server.services.events import (
    ArgumentsDelta,
    EventStream,
    Finish,
    Opening,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from schemas.common import ResponseModel

logger = logging.getLogger(__name__)

DONE = b"data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# Where the app puts the ASGI server's own `send`, for a stream's body (see
# `EventStreamResponse`). Every layer between it and the route looks at the response's
# start only (its status, its headers); a layer that rewrote bodies would have to sit
# outside it.
BODY_SEND = "oai.body_send"
BODY = "http.response.body"
# What `Response.init_headers` makes of `HEADERS`, made once.
_RAW_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    *((name.lower().encode(), value.encode()) for name, value in HEADERS.items()),
]


class EventStreamResponse(Response):
    """`text/event-stream` of an answer's events, each encoded and sent as it comes.

    What Starlette's `StreamingResponse` around an encoding generator did, for less per
    chunk and per request: the events are encoded in the sending loop (a light event is
    spliced into its kind's prebuilt bytes, `oai_server.http.templates`), each body goes
    straight to the ASGI server's `send` (`BODY_SEND`), past the layers that only wrap
    `send` to see the response start, `[DONE]` ends the body in the same message, and the
    client's disconnect is watched by the task that watched the stream's start.
    """

    media_type = "text/event-stream"

    def __init__(
        self, stream: EventStream[ResponseModel], disconnect: Disconnect | None = None
    ) -> None:
        """`disconnect`: the watch of the request that started `stream`, kept on."""
        self.stream = stream
        self.disconnect = disconnect
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_RAW_HEADERS)  # a copy: a route may add its own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        # A client that leaves cancels the stream, and so aborts its engine request.
        disconnect = self.disconnect or Disconnect(receive)
        try:
            await disconnect.guard(self._send_events(scope.get(BODY_SEND, send)))
        except ClientDisconnect:
            pass
        finally:
            disconnect.stop()
        if self.background is not None:  # as Starlette runs it, client gone or not
            await self.background()

    async def _send_events(self, send: Send) -> None:
        """Every event, then `[DONE]`; an error after the 200 becomes one error event.

        The status line has gone out by then, so the error travels in the stream, in the
        same envelope as any other error, and the stream still ends with `[DONE]`.

        Events that are ready together go out in one message, one write to the socket
        fewer each: a choice's `Opening` waits for the event after it (a stream yields one
        only where that event is ready: the engine's first step is in hand when it starts),
        and once every opened choice has finished, what is left (the usage, `[DONE]`)
        follows without the engine, and goes out with the last finish.
        """
        stream = self.stream
        light = LightEvents(stream.chunks)
        index, around, before, tail = -1, None, b"", b""
        thinking: dict[int, tuple[bytes, bytes] | None] = {}  # by choice: a thought's parts
        sending = False
        held = b""  # bytes waiting for the next event's
        open_choices, ending = 0, False
        try:
            async for item in stream:
                if isinstance(item, TextDelta):
                    if item.index != index:  # the choice's parts, made once per change
                        index, around = item.index, light.text_around(item.index)
                        before, tail = around or (b"", b"")
                    if around is not None:
                        body = before + json_text(item.text) + tail
                    else:
                        body = event(stream.chunks.of(item))
                elif isinstance(item, Opening):
                    held += light.encode(item)
                    open_choices += 1
                    continue
                elif isinstance(item, Finish):
                    body = light.encode(item)
                    open_choices -= 1
                    ending = open_choices == 0
                elif isinstance(item, Usage):
                    body = light.encode(item)
                elif isinstance(item, ReasoningDelta):
                    if item.index not in thinking:
                        thinking[item.index] = light.reasoning_around(item.index)
                    parts = thinking[item.index]
                    if parts is not None:
                        body = parts[0] + json_text(item.text) + parts[1]
                    else:
                        body = event(stream.chunks.of(item))
                elif isinstance(item, ArgumentsDelta):
                    body = light.arguments(item)
                else:
                    body = event(item)
                if held:
                    body, held = held + body, b""
                if ending:
                    held = body
                    continue
                sending = True
                await send({"type": BODY, "body": body, "more_body": True})
                sending = False
        except Exception as exc:  # every failure of the answer reaches the client as an event
            if sending:  # the client's side failed, not the answer: nothing to tell it
                raise
            logger.warning("stream failed after it started: %r", exc)
            held += event(error_body(to_openai_error(exc)))
        await send({"type": BODY, "body": held + DONE, "more_body": False})
