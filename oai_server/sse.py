"""Server-sent events framing, as OpenAI streams: `data: {json}\\n\\n` ... `data: [DONE]\\n\\n`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse

from oai_server.error_responses import error_body, to_openai_error
from schemas.common import ResponseModel

logger = logging.getLogger(__name__)

DONE = b"data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(payload: ResponseModel) -> bytes:
    return b"data: " + payload.to_json() + b"\n\n"


async def frame(chunks: AsyncIterator[ResponseModel]) -> AsyncIterator[bytes]:
    """Frame chunks as events; an error after the 200 becomes one error event.

    The status line has gone out by then, so the error travels in the stream, in the
    same envelope as any other error, and the stream still ends with `[DONE]`.
    """
    try:
        async for chunk in chunks:
            yield event(chunk)
    except Exception as exc:  # noqa: BLE001 - every failure must reach the client as an event
        logger.warning("stream failed after it started: %r", exc)
        yield event(error_body(to_openai_error(exc)))
    yield DONE


def event_stream(chunks: AsyncIterator[ResponseModel]) -> StreamingResponse:
    return StreamingResponse(frame(chunks), media_type="text/event-stream", headers=HEADERS)
