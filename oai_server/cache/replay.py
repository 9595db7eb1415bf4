"""Answer from an entry: the same events again, with a fresh `id` and `created`.

A streamed replay goes through the same SSE encoder as a live stream, so its chunks,
text templates and `[DONE]` are byte for byte what a miss sends, only faster; a whole
replay is the fold of the same events by the service's assembler.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import Response

from oai_server.cache.endpoints import Endpoint, Event
from oai_server.cache.entry import Entry
from oai_server.http.answer import json_response
from oai_server.http.sse import event_stream
from oai_server.services.common import StreamSettings
from oai_server.services.events import EventStream, TextDelta
from schemas.common import GenerationRequest, ResponseModel


def _events(entry: Entry, id_: str, created: int, with_usage: bool) -> list[Event]:
    events: list[Event] = []
    for event in entry.events:
        if isinstance(event, TextDelta):
            events.append(event)
            continue
        chunk = event.model_copy(update={"id": id_, "created": created})
        if with_usage:
            # As a live stream that asked for usage: `"usage": null` until the last chunk.
            chunk.usage = None  # type: ignore[attr-defined]
        events.append(chunk)
    return events


def replay_stream(
    endpoint: Endpoint[Any, Any, Any], req: GenerationRequest, entry: Entry, request_id: str | None
) -> Response:
    """The entry as an SSE stream, exactly as a live answer streams it."""
    id_, created = endpoint.fresh_identity(request_id)
    with_usage = StreamSettings.of(req.stream_options).include_usage
    events = _events(entry, id_, created, with_usage)

    def chunk_of(index: int, text: str) -> ResponseModel:
        chunk = endpoint.text_chunk(id_, created, req.model, index, text)
        if with_usage:
            chunk.usage = None  # type: ignore[attr-defined]
        return chunk

    async def stream() -> AsyncIterator[Event]:
        for event in events:
            yield event
        if with_usage:
            yield endpoint.usage_chunk(id_, created, req.model, entry.usage)

    return event_stream(EventStream(stream(), chunk_of))


def replay_whole(
    endpoint: Endpoint[Any, Any, Any], req: GenerationRequest, entry: Entry, request_id: str | None
) -> Response:
    """The entry as the whole response, as a non-streamed answer."""
    id_, created = endpoint.fresh_identity(request_id)
    events = _events(entry, id_, created, with_usage=False)
    return json_response(endpoint.assemble(req, events, entry.usage, id_, created))
