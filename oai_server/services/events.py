"""What a service streams: typed events, which each transport turns into its own bytes.

A stream is mostly one kind of event, a choice's next piece of text; `TextDelta` (the
engine's `ChoiceDelta` is one) carries just that, so no pydantic model is built per token.
Everything else is the typed chunk itself. `EventStream.chunk_of` turns a `TextDelta` back
into the chunk it stands for, so every consumer (the SSE encoder, the Realtime socket, the
cache, the store) can see full chunks, and the SSE encoder can splice text into a template
cut from that chunk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from oai_server.engine.types import TextDelta
from schemas.common import ResponseModel

__all__ = ["EventStream", "TextDelta"]

Chunk = TypeVar("Chunk", bound=ResponseModel, covariant=True)


@dataclass(frozen=True)
class EventStream(Generic[Chunk]):
    """The events of one answer, and how to make the chunk a `TextDelta` stands for."""

    events: AsyncIterator[Chunk | TextDelta]
    chunk_of: Callable[[int, str], Chunk]

    def __aiter__(self) -> AsyncIterator[Chunk | TextDelta]:
        return self.events

    async def chunks(self) -> AsyncIterator[Chunk]:
        """The events as full chunks, for consumers that want nothing else."""
        async for event in self.events:
            yield self.chunk_of(event.index, event.text) if isinstance(event, TextDelta) else event
