"""What a service streams: typed events, which each transport turns into its own bytes.

A stream is mostly one kind of event, a choice's next piece of text; `TextDelta` (the
engine's `ChoiceDelta` is one) carries just that, so no pydantic model is built per token.
A chat choice's thinking (`delta.reasoning`, from a reasoning parser) is as bare a
`ReasoningDelta`, and a piece of a function call's arguments an `ArgumentsDelta`. A plain
chat choice's first and last chunks are as bare: `Opening` (the assistant's role) and
`Finish` (its finish reason), and so is the chunk that ends a stream asking for usage:
the request's `Usage`, the counts themselves. Everything else is the typed chunk itself.

`Chunks` turns a light event back into the chunk it stands for, so every consumer (the
SSE encoder, the Realtime socket, the cache, the store) can see full chunks. It builds
them for any answer's `id` and `created`, and says what else the chunks' bytes depend on
(`shape`), so the SSE encoder can cut templates from sample chunks once per shape and
splice each answer's identity and each event's values into them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar, final

from oai_server.engine.types import TextDelta
from oai_server.generation.engine_request import Usage
from schemas.common import ResponseModel

__all__ = [
    "LIGHT",
    "ArgumentsDelta",
    "Chunks",
    "EventStream",
    "Finish",
    "Light",
    "Opening",
    "ReasoningDelta",
    "TextDelta",
    "Usage",
]

Chunk = TypeVar("Chunk", bound=ResponseModel, covariant=True)


@final  # none derives from it: a stream's writer tells it by its type, no `isinstance`
@dataclass(slots=True)
class ReasoningDelta:
    """A chat choice's next piece of thinking (`delta.reasoning`), as light as its text:
    half of a reasoning model's answer."""

    index: int
    text: str


@final  # as `ReasoningDelta`
@dataclass(slots=True)
class ArgumentsDelta:
    """A piece of the arguments of a chat choice's function call `call` (its index among
    the choice's calls): most of a tool-calling answer, as light as text."""

    index: int
    call: int
    text: str


@dataclass(slots=True)
class Opening:
    """A chat choice's first chunk: the assistant's role, empty content.

    Sent with the event after it, in one write (`oai_server.http.sse`): a stream yields
    one only where that event is ready, and the typed chunk elsewhere.
    """

    index: int


@dataclass(slots=True)
class Finish:
    """A choice's last chunk: its finish reason, and nothing else."""

    index: int
    reason: str


Light = TextDelta | ReasoningDelta | ArgumentsDelta | Opening | Finish | Usage
LIGHT = (TextDelta, ReasoningDelta, ArgumentsDelta, Opening, Finish, Usage)  # for `isinstance`


@dataclass(frozen=True)
class Chunks(Generic[Chunk]):
    """How one answer's light events become its chunks.

    `build(id, created, event)` is the chunk `event` stands for in an answer with that
    `id` and `created`; the answer's own are `identity`. `shape` is everything else the
    chunk depends on (the endpoint, the model, the stream options, the tier): two
    `Chunks` of equal shape build equal chunks for equal arguments.
    """

    build: Callable[[str, int, Light], Chunk]
    identity: tuple[str, int]
    shape: Hashable

    def of(self, event: Light) -> Chunk:
        """The chunk `event` stands for in this answer."""
        return self.build(self.identity[0], self.identity[1], event)


@dataclass(frozen=True)
class EventStream(Generic[Chunk]):
    """The events of one answer, and how its light events become chunks."""

    events: AsyncIterator[Chunk | Light]
    chunks: Chunks[Chunk]

    def __aiter__(self) -> AsyncIterator[Chunk | Light]:
        return self.events
