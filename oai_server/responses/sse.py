"""Responses events as server-sent events: `event: <type>` and `data: {json}`, as OpenAI sends.

A Responses stream has no `data: [DONE]`: its last event (`response.completed`,
`response.incomplete` or `response.failed`) says it is over. A failure before the
first event went out is an ordinary HTTP error; after, it is `response.failed`, or,
should even that be impossible, one `error` event.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse

from oai_server.error_responses import to_openai_error
from oai_server.http.sse import HEADERS
from schemas.response_events import ErrorEvent, ResponseStreamEvent

logger = logging.getLogger(__name__)


def frame(event: ResponseStreamEvent) -> bytes:
    return b"event: " + event.type.encode() + b"\ndata: " + event.to_json() + b"\n\n"


async def encode(events: AsyncIterator[ResponseStreamEvent]) -> AsyncIterator[bytes]:
    sequence = 0
    try:
        async for event in events:
            sequence = event.sequence_number + 1
            yield frame(event)
    except Exception as exc:  # noqa: BLE001 - every failure must reach the client as an event
        logger.warning("response stream failed after it started: %r", exc)
        error = to_openai_error(exc)
        yield frame(
            ErrorEvent(
                code=error.code, message=error.message, param=error.param, sequence_number=sequence
            )
        )


def event_stream(events: AsyncIterator[ResponseStreamEvent]) -> StreamingResponse:
    return StreamingResponse(encode(events), media_type="text/event-stream", headers=HEADERS)
