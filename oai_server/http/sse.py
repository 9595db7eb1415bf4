"""Server-sent events: the one response that streams an answer, whatever its API.

`EventStreamResponse` sends the start, watches the client (one leaving cancels the
stream, and so aborts its engine request), sends the bodies straight to the ASGI
server (`BODY_SEND`) and, when asked, keeps an idle stream alive with pings. What the
bytes are is its writer's (`EventWriter`), one per wire: OpenAI's chunks
(`ChunkWriter`: `data: {json}\\n\\n` ... `data: [DONE]\\n\\n`), and the typed events of
Responses and Anthropic (`FramedWriter`: `event: <type>\\n` and `data: {json}`, each
`frame`d, no `[DONE]`: the last event says the stream is over).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

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

Handle = TypeVar("Handle", contravariant=True)

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


class TypedEvent(Protocol):
    """An event of Responses or Anthropic: its `type` names it on the wire."""

    @property
    def type(self) -> str: ...

    def to_json(self) -> bytes: ...


def frame(event: TypedEvent) -> bytes:
    """`event: <type>` and `data: {json}`, as Responses and Anthropic stream their events."""
    return b"event: " + event.type.encode() + b"\ndata: " + event.to_json() + b"\n\n"


class EventWriter(ABC):
    """One answer's events as the bytes of its stream, each sent as it comes.

    `write` sends them and ends the body; a failure of the answer after the 200 has gone
    out ends it with `failure`'s error event (the status line has gone, so the error
    travels in the stream), unless it was the client's side that failed (`sending`).
    """

    def failed(self, exc: Exception) -> bytes:
        """The error event that ends a stream whose answer failed after it started."""
        logger.warning("stream failed after it started: %r", exc)
        return self.failure(exc)

    @abstractmethod
    def failure(self, exc: Exception) -> bytes:
        """`exc` as this wire's error event."""

    @abstractmethod
    async def write(self, send: Send) -> None:
        """Every event's bytes (`more_body`), then the body's end."""


@dataclass(frozen=True)
class Ping:
    """An event sent whenever nothing else has gone out for `interval_s` (Anthropic's)."""

    body: bytes
    interval_s: float


class _Pinger:
    """When the stream last sent a body, and the task that pings it when idle."""

    def __init__(self, send: Send, ping: Ping) -> None:
        self._send, self._ping = send, ping
        self._loop = asyncio.get_running_loop()
        self._since = self._loop.time()
        self._task = self._loop.create_task(self._run())

    async def send(self, message: Message) -> None:
        self._since = self._loop.time()
        await self._send(message)

    async def _run(self) -> None:
        # One timer task per stream, not a wait with a timeout per event, which cost
        # more per token than the rest of the encoding.
        interval = self._ping.interval_s
        while True:
            await asyncio.sleep(self._since + interval - self._loop.time())
            if self._loop.time() - self._since >= interval:
                self._since = self._loop.time()
                await self._send({"type": BODY, "body": self._ping.body, "more_body": True})

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.wait({self._task})


class EventStreamResponse(Response):
    """`text/event-stream` of an answer's events, written by `writer` as they come.

    What Starlette's `StreamingResponse` around an encoding generator did, for less per
    chunk and per request: the writer encodes the events in its sending loop, each body
    goes straight to the ASGI server's `send` (`BODY_SEND`), past the layers that only
    wrap `send` to see the response start, and the client's disconnect is watched by the
    task that watched the stream's start. With `ping`, an idle stream is kept alive.
    """

    media_type = "text/event-stream"

    def __init__(
        self, writer: EventWriter, disconnect: Disconnect | None = None, ping: Ping | None = None
    ) -> None:
        """`disconnect`: the watch of the request that started the stream, kept on."""
        self.writer = writer
        self.disconnect = disconnect
        self.ping = ping
        self.status_code = 200
        self.background = None
        self.raw_headers = [*_RAW_HEADERS]  # a copy: a route may add its own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        # A client that leaves cancels the stream, and so aborts its engine request.
        disconnect = self.disconnect or Disconnect(receive)
        body_send = scope.get(BODY_SEND, send)
        pinger = None if self.ping is None else _Pinger(body_send, self.ping)
        try:
            if pinger is None:
                await disconnect.guard(self.writer.write(body_send))
            else:
                await disconnect.guard(self.writer.write(pinger.send))
        except ClientDisconnect:
            pass
        finally:
            disconnect.stop()
            if pinger is not None:
                await pinger.stop()
        if self.background is not None:  # as Starlette runs it, client gone or not
            await self.background()


class Streaming(Protocol[Handle]):
    """A service whose started answers stream OpenAI's chunks (`GenerationService`)."""

    def stream(self, handle: Handle) -> EventStream[ResponseModel]: ...


class ChunkWriter(EventWriter):
    """OpenAI's chunks (chat, text completions): `data: {json}`, then `data: [DONE]`."""

    def __init__(
        self, service: Streaming[Handle], job: object, handle: Handle, answer_id: str | None
    ) -> None:
        """The writer of `service`'s started answer `handle` (as `answer` asks an encoder
        for it: the constructor is the encoder's `stream`)."""
        self.stream = service.stream(handle)

    def failure(self, exc: Exception) -> bytes:
        return event(error_body(to_openai_error(exc)))

    async def write(self, send: Send) -> None:
        """Every event, then `[DONE]`; an error after the 200 becomes one error event,
        and the stream still ends with `[DONE]`.

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
                # The light kinds after text by their type, not by `isinstance`: a call less each.
                elif type(item) is ReasoningDelta:
                    if item.index not in thinking:
                        thinking[item.index] = light.reasoning_around(item.index)
                    parts = thinking[item.index]
                    if parts is not None:
                        body = parts[0] + json_text(item.text) + parts[1]
                    else:
                        body = event(stream.chunks.of(item))
                elif type(item) is ArgumentsDelta:
                    body = light.arguments(item)
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
            held += self.failed(exc)
        await send({"type": BODY, "body": held + DONE, "more_body": False})


Event = TypeVar("Event")


class FramedWriter(EventWriter, Generic[Event]):
    """Typed events (Responses', Anthropic's), each `encode`d as it comes; the last event
    ends the stream, no `[DONE]` after it."""

    def __init__(self, events: AsyncIterator[Event]) -> None:
        self.events = events

    @abstractmethod
    def encode(self, event: Event) -> bytes:
        """The bytes of `event`: its `frame`, or a template's, spliced."""

    async def write(self, send: Send) -> None:
        sending = False
        tail = b""
        try:
            async for item in self.events:
                body = self.encode(item)
                sending = True
                await send({"type": BODY, "body": body, "more_body": True})
                sending = False
        except Exception as exc:  # every failure of the answer reaches the client as an event
            if sending:  # the client's side failed, not the answer: nothing to tell it
                raise
            tail = self.failed(exc)
        finally:
            # Its source's engine request ends now, not when the collector gets to it.
            aclose = getattr(self.events, "aclose", None)
            if aclose is not None:
                await aclose()
        await send({"type": BODY, "body": tail, "more_body": False})
