"""The Responses wire for the answer flow (`oai_server.http.answer`): a response's events
as server-sent events, `event: <type>` and `data: {json}`, as OpenAI sends, or the whole
response.

A Responses stream has no `data: [DONE]`: its last event (`response.completed`,
`response.incomplete` or `response.failed`) says it is over. A failure before the
first event went out is an ordinary HTTP error; after, it is `response.failed`, or,
should even that be impossible, one `error` event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pydantic_core
from fastapi import Request

from oai_server.error_responses import to_openai_error
from oai_server.http.sse import EventStreamResponse, FramedWriter, frame
from oai_server.http.templates import cut, json_text
from oai_server.responses.service import ResponseJob, ResponsesService
from oai_server.responses.stream import RunEvent, TextDeltaOut
from oai_server.services.chat import ChatRequest
from schemas.response_events import ErrorEvent
from schemas.responses import Response as ResponseObject

# Values no real event carries, marking where a sample text delta's fields sit.
_ID_MARK = "\x00oai-item\x00"
_INDEX_MARK = 987654321
_TEXT_MARK = "\x00oai-text\x00"
_SEQUENCE_MARK = 123456789


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


class ResponseWriter(FramedWriter[RunEvent]):
    """One response's events; a failure the run could not turn into `response.failed`
    is one `error` event, numbered after the last one sent."""

    def __init__(self, events: AsyncIterator[RunEvent]) -> None:
        super().__init__(events)
        self.sequence = 0

    def encode(self, event: RunEvent) -> bytes:
        self.sequence = event.sequence_number + 1
        return TEXT_DELTA(event) if isinstance(event, TextDeltaOut) else frame(event)

    def failure(self, exc: Exception) -> bytes:
        error = to_openai_error(exc)
        return frame(
            ErrorEvent(
                code=error.code,
                message=error.message,
                param=error.param,
                sequence_number=self.sequence,
            )
        )


class FrameWriter(FramedWriter[bytes]):
    """Events already encoded (a background response's, as it keeps them)."""

    def encode(self, event: bytes) -> bytes:
        return event

    def failure(self, exc: Exception) -> bytes:
        # The run's own failure is in its frames (`response.failed`): this is the
        # following's, which has nothing of its own to say.
        return b""


class Responses:
    """The encoder `answer` takes for `POST /v1/responses` (not in the background)."""

    ping = None

    def answer_id(self, request: Request, req: Any, job: ResponseJob) -> str:
        """The response's id, made when it was prepared (and its engine request's)."""
        return job.response.id

    def stream(
        self, service: ResponsesService, job: ResponseJob, handle: ChatRequest, answer_id: Any
    ) -> ResponseWriter:
        return ResponseWriter(service.events(job, handle))

    async def whole(
        self, service: ResponsesService, job: ResponseJob, handle: ChatRequest, answer_id: Any
    ) -> ResponseObject:
        return await service.complete(job, handle)


RESPONSES = Responses()


def frames_stream(frames: AsyncIterator[bytes]) -> EventStreamResponse:
    """Already encoded events (a background response's), as a stream: the client that
    leaves stops following them, not the run."""
    return EventStreamResponse(FrameWriter(frames))
