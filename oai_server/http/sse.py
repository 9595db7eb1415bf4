"""Server-sent events framing, as OpenAI streams: `data: {json}\\n\\n` ... `data: [DONE]\\n\\n`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

import pydantic_core
from starlette.responses import StreamingResponse

from oai_server.error_responses import error_body, to_openai_error
from oai_server.services.events import EventStream, TextDelta
from schemas.common import ResponseModel

logger = logging.getLogger(__name__)

DONE = b"data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

# Values no real chunk carries, marking where a sample chunk's index and text sit.
_INDEX_MARK = 987654321
_TEXT_MARK = "\x00oai-text\x00"


def event(payload: ResponseModel) -> bytes:
    return b"data: " + payload.to_json() + b"\n\n"


class TextEvents:
    """Events of the commonest chunk, one choice's next text, without building a model.

    Most of a stream is such chunks, and building and serializing three pydantic
    models per token was most of the server's own cost per token. The template is cut
    from a chunk that `sample(index, text)` builds and serializes with marker values,
    so its bytes are those of the typed chunk by construction: only the index and the
    JSON-escaped text (escaped by pydantic's own encoder) are spliced in.
    """

    def __init__(self, sample: Callable[[int, str], ResponseModel]) -> None:
        encoded = event(sample(_INDEX_MARK, _TEXT_MARK))
        head, rest = encoded.split(str(_INDEX_MARK).encode(), 1)
        middle, tail = rest.split(pydantic_core.to_json(_TEXT_MARK), 1)
        self._head, self._middle, self._tail = head, middle, tail

    def __call__(self, index: int, text: str) -> bytes:
        return b"".join(
            (self._head, b"%d" % index, self._middle, pydantic_core.to_json(text), self._tail)
        )


async def encode(stream: EventStream[ResponseModel]) -> AsyncIterator[bytes]:
    """The stream's events as SSE bytes; an error after the 200 becomes one error event.

    The status line has gone out by then, so the error travels in the stream, in the
    same envelope as any other error, and the stream still ends with `[DONE]`.
    """
    text_events: TextEvents | None = None
    try:
        async for item in stream:
            if isinstance(item, TextDelta):
                if text_events is None:
                    text_events = TextEvents(stream.chunk_of)
                yield text_events(item.index, item.text)
            else:
                yield event(item)
    except Exception as exc:  # noqa: BLE001 - every failure must reach the client as an event
        logger.warning("stream failed after it started: %r", exc)
        yield event(error_body(to_openai_error(exc)))
    yield DONE


def event_stream(stream: EventStream[ResponseModel]) -> StreamingResponse:
    return StreamingResponse(encode(stream), media_type="text/event-stream", headers=HEADERS)
