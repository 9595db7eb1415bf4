"""Responses events as server-sent events: `event: <type>` and `data: {json}`, as OpenAI sends.

A Responses stream has no `data: [DONE]`: its last event (`response.completed`,
`response.incomplete` or `response.failed`) says it is over. A failure before the
first event went out is an ordinary HTTP error; after, it is `response.failed`, or,
should even that be impossible, one `error` event.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pydantic_core
from starlette.responses import StreamingResponse

from oai_server.error_responses import to_openai_error
from oai_server.http.sse import HEADERS
from oai_server.http.templates import cut, json_text
from oai_server.responses.stream import RunEvent, TextDeltaOut
from schemas.response_events import ErrorEvent, ResponseStreamEvent

logger = logging.getLogger(__name__)


# Values no real event carries, marking where a sample text delta's fields sit.
_ID_MARK = "\x00oai-item\x00"
_INDEX_MARK = 987654321
_TEXT_MARK = "\x00oai-text\x00"
_SEQUENCE_MARK = 123456789


def frame(event: ResponseStreamEvent) -> bytes:
    return b"event: " + event.type.encode() + b"\ndata: " + event.to_json() + b"\n\n"


class TextDeltaFrames:
    """`response.output_text.delta` frames spliced into a template cut from a typed event.

    As for chat's light events (`oai_server.http.templates`): the bytes are those of
    the typed event by construction; only the values, JSON-encoded by pydantic, vary.
    """

    def __init__(self) -> None:
        sample = TextDeltaOut(_ID_MARK, _INDEX_MARK, _TEXT_MARK, _SEQUENCE_MARK).event()
        marks = [
            pydantic_core.to_json(_ID_MARK),
            str(_INDEX_MARK).encode(),
            pydantic_core.to_json(_TEXT_MARK),
            str(_SEQUENCE_MARK).encode(),
        ]
        pieces = cut(frame(sample), marks)
        assert pieces is not None, "each marker is in the sample event once, in order"
        self._pieces = pieces

    def __call__(self, delta: TextDeltaOut) -> bytes:
        p = self._pieces
        return b"".join(
            (
                p[0],
                pydantic_core.to_json(delta.item_id),
                p[1],
                b"%d" % delta.output_index,
                p[2],
                json_text(delta.delta),
                p[3],
                b"%d" % delta.sequence_number,
                p[4],
            )
        )


TEXT_DELTA = TextDeltaFrames()


async def encode(events: AsyncIterator[RunEvent]) -> AsyncIterator[bytes]:
    sequence = 0
    try:
        async for event in events:
            sequence = event.sequence_number + 1
            yield TEXT_DELTA(event) if isinstance(event, TextDeltaOut) else frame(event)
    except Exception as exc:  # noqa: BLE001 - every failure must reach the client as an event
        logger.warning("response stream failed after it started: %r", exc)
        error = to_openai_error(exc)
        yield frame(
            ErrorEvent(
                code=error.code, message=error.message, param=error.param, sequence_number=sequence
            )
        )


def event_stream(events: AsyncIterator[RunEvent]) -> StreamingResponse:
    return StreamingResponse(encode(events), media_type="text/event-stream", headers=HEADERS)


def frames_stream(frames: AsyncIterator[bytes]) -> StreamingResponse:
    """Already encoded events (a background response's), as a stream."""
    return StreamingResponse(frames, media_type="text/event-stream", headers=HEADERS)
