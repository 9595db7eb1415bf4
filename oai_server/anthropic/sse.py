"""Anthropic's stream as server-sent events: `event: <type>` and `data: {json}`.

The stream has no `[DONE]`: `message_stop` ends it. A `ping` follows `message_start`
and comes again whenever no event has for `PING_INTERVAL_S` (a long prefill for a
later block, a tool call the parser holds back): proxies and clients that time an idle
connection out see it alive, as Anthropic's own stream keeps them. A failure after the
200 went out is one `error` event in Anthropic's envelope, the last of the stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator

from starlette.responses import StreamingResponse

from oai_server.error_responses import anthropic_error
from oai_server.http.sse import HEADERS
from schemas.anthropic import MessageStartEvent, PingEvent, StreamEvent

logger = logging.getLogger(__name__)

PING_INTERVAL_S = 10.0


def frame(event: StreamEvent) -> bytes:
    return b"event: " + event.type.encode() + b"\ndata: " + event.to_json() + b"\n\n"


PING = frame(PingEvent())


async def encode(events: AsyncGenerator[StreamEvent, None]) -> AsyncIterator[bytes]:
    """Each event's frame as it comes, and a ping while none comes."""
    pending: asyncio.Future[StreamEvent] | None = None
    try:
        while True:
            pending = asyncio.ensure_future(anext(events))
            while not pending.done():
                done, _ = await asyncio.wait({pending}, timeout=PING_INTERVAL_S)
                if not done:
                    yield PING
            try:
                event = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            yield frame(event)
            if isinstance(event, MessageStartEvent):
                yield PING
    except Exception as exc:  # noqa: BLE001 - every failure must reach the client as an event
        logger.warning("message stream failed after it started: %r", exc)
        yield frame(anthropic_error(exc)[1])
    finally:
        if pending is not None:  # the client left while the next event was awaited
            pending.cancel()
            await asyncio.wait({pending})
        await events.aclose()


def message_stream(events: AsyncGenerator[StreamEvent, None]) -> StreamingResponse:
    return StreamingResponse(encode(events), media_type="text/event-stream", headers=HEADERS)
