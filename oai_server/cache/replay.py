"""Answer from an entry: the same events again, with a fresh `id` and `created`.

A streamed replay is an `EventStream` like a live one, its chunks built by the service
itself, so the SSE encoder sends byte for byte what a miss sends, only faster; a whole
replay is the fold of the same events by the service's assembler. Either way the request's
record (its access-log line) gets the entry's token counts, as the answer's `usage` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from oai_server.cache.endpoints import Endpoint, Event, Streamed
from oai_server.cache.entry import Entry
from oai_server.http.answer import Asked
from oai_server.observability.context import current_request
from oai_server.services.common import StreamSettings
from oai_server.services.events import LIGHT, EventStream
from schemas.common import GenerationRequest, ResponseModel


def _events(entry: Entry, id_: str, created: int, with_usage: bool) -> list[Event]:
    events: list[Event] = []
    for event in entry.events:
        if isinstance(event, LIGHT):
            events.append(event)
            continue
        chunk = event.model_copy(update={"id": id_, "created": created})
        if with_usage:
            # As a live stream that asked for usage: `"usage": null` until the last chunk.
            chunk.usage = None  # type: ignore[attr-defined]
        events.append(chunk)
    return events


def _count_tokens(entry: Entry) -> None:
    record = current_request.get()
    if record is not None:
        record.prompt_tokens += entry.prompt_tokens
        record.completion_tokens += entry.completion_tokens


def replay_stream(
    endpoint: Streamed[Any, Any, Any],
    req: GenerationRequest,
    entry: Entry,
    identity: tuple[str, int],
) -> EventStream[ResponseModel]:
    """The entry's events, exactly as a live answer streams them."""
    _count_tokens(entry)
    id_, created = identity
    opts = StreamSettings.of(req.stream_options)
    events = _events(entry, id_, created, opts.include_usage)

    async def stream() -> AsyncIterator[Event]:
        for event in events:
            yield event
        if opts.include_usage and entry.reasoning_tokens is not None:
            # As live: a chunk of its own (the light usage's encoding has no details).
            yield chunks.of(entry.counts)
        elif opts.include_usage:
            yield entry.counts

    chunks = endpoint.chunks(identity, req.model, opts, req.service_tier)
    return EventStream(stream(), chunks)


def replay_whole(
    endpoint: Endpoint[Any, Any, Any],
    req: Asked,
    entry: Entry,
    identity: tuple[str, int],
) -> ResponseModel:
    """The entry as the whole response, as a non-streamed answer."""
    _count_tokens(entry)
    id_, created = identity
    events = _events(entry, id_, created, with_usage=False)
    return endpoint.assemble(req, events, entry.counts, id_, created)
