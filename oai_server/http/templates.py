"""A stream's light events as SSE bytes, without building a chunk per event.

Most of a stream is light events (`oai_server.services.events`): a choice's next text,
piece of thinking or piece of a call's arguments, a plain choice's opening and finish,
and the usage that ends it. Building and serializing a pydantic chunk for each was most
of the server's own cost, per token and per request. Here each kind of event's bytes are
cut from a sample chunk that `Chunks.build` makes and serializes with marker values (the
answer's `id` and `created`, the event's indices, text or counts), once per shape of
answer (`Chunks.shape`: the endpoint, model, stream options and tier). An answer splices
its identity in once; an event, its values. The bytes are those of the typed chunk by
construction: the values are JSON-encoded by pydantic's own encoder.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence

import pydantic_core

from oai_server.services.events import (
    ArgumentsDelta,
    Chunks,
    Finish,
    Light,
    Opening,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from schemas.common import ResponseModel

# Values no real chunk carries, marking where a sample chunk's values sit.
_ID_MARK = "\x00oai-id\x00"
_CREATED_MARK = 987654320
_INDEX_MARK = 987654321
_TEXT_MARK = "\x00oai-text\x00"
_CALL_MARK = 987654325
# The usage's counts: the total is theirs, 1975308645, which no other marker's digits hold.
_PROMPT_MARK = 987654322
_COMPLETION_MARK = 987654323
_CACHED_MARK = 987654324
_USAGE_BYTES = tuple(
    b"%d" % n
    for n in (_PROMPT_MARK, _COMPLETION_MARK, _PROMPT_MARK + _COMPLETION_MARK, _CACHED_MARK)
)
_ID_BYTES = pydantic_core.to_json(_ID_MARK)
_CREATED_BYTES = b"%d" % _CREATED_MARK
_INDEX_BYTES = b"%d" % _INDEX_MARK
_TEXT_BYTES = pydantic_core.to_json(_TEXT_MARK)
_CALL_BYTES = b"%d" % _CALL_MARK
# Shapes are few (a server's models, tiers, stream options): the bound only guards memory.
_MAX_SHAPES = 256

# A text's JSON string, remembered: the same few thousand token texts make up most of
# every answer, and a hit costs half the encoding. A step's text is a token or a few (more
# only when the reader lags), so the cache stays small.
json_text = functools.lru_cache(maxsize=4096)(pydantic_core.to_json)


def event(payload: ResponseModel) -> bytes:
    """One server-sent event of a typed payload."""
    return b"data: " + payload.to_json() + b"\n\n"


def cut(sample: bytes, holes: Sequence[bytes]) -> list[bytes] | None:
    """`sample` split at each of `holes` in turn; None unless each is there once, in order
    (a value that happened to contain a marker would make its template wrong)."""
    parts = []
    for hole in holes:
        if sample.count(hole) != 1:
            return None
        before, sample = sample.split(hole)
        parts.append(before)
    parts.append(sample)
    return parts


# A shape's samples, by kind of event: cut at the event's values, with the indices of the
# parts that hold the answer's identity; None for a sample that did not cut cleanly (its
# events are then encoded from their chunks).
Cuts = dict[str, tuple[list[bytes], tuple[int, ...]] | None]
_shapes: dict[Hashable, Cuts] = {}


def _cuts_of(shape: Hashable) -> Cuts:
    cuts = _shapes.get(shape)
    if cuts is None:
        if len(_shapes) >= _MAX_SHAPES:
            _shapes.clear()
        cuts = _shapes[shape] = {}
    return cuts


def _sample(kind: str) -> tuple[Light, tuple[bytes, ...]]:
    """The sample event of `kind` ("text", "reasoning", "opening", "usage", "finish
    <reason>"), and its holes."""
    if kind == "text":
        return TextDelta(_INDEX_MARK, _TEXT_MARK), (_INDEX_BYTES, _TEXT_BYTES)
    if kind == "reasoning":
        return ReasoningDelta(_INDEX_MARK, _TEXT_MARK), (_INDEX_BYTES, _TEXT_BYTES)
    if kind == "arguments":
        sample = ArgumentsDelta(_INDEX_MARK, _CALL_MARK, _TEXT_MARK)
        return sample, (_INDEX_BYTES, _CALL_BYTES, _TEXT_BYTES)
    if kind == "opening":
        return Opening(_INDEX_MARK), (_INDEX_BYTES,)
    if kind == "usage":
        return Usage(_PROMPT_MARK, _COMPLETION_MARK, _CACHED_MARK), _USAGE_BYTES
    return Finish(_INDEX_MARK, kind.removeprefix("finish ")), (_INDEX_BYTES,)


class LightEvents:
    """One answer's light events as SSE bytes."""

    def __init__(self, chunks: Chunks[ResponseModel]) -> None:
        self.chunks = chunks
        self._cuts = _cuts_of(chunks.shape)
        id_, created = chunks.identity
        self._id = pydantic_core.to_json(id_)
        self._created = b"%d" % created
        # The parts with this answer's identity in, by part: the kinds share their head.
        self._filled: dict[bytes, bytes] = {}
        # A delta's parts by kind ("text", "reasoning"); None where they cannot be cut.
        self._deltas: dict[str, list[bytes] | None] = {}
        self._opening: list[bytes] | None = None
        self._finishes: dict[str, list[bytes] | None] = {}
        self._usage: list[bytes] | None = None
        # A call's arguments' parts; None where they cannot be cut, unset until asked for.
        self._arguments: list[bytes] | None = None
        self._arguments_cut = False

    def _own(self, kind: str) -> list[bytes] | None:
        """The template of `kind`, with this answer's identity in it."""
        try:
            cut_sample = self._cuts[kind]
        except KeyError:
            cut_sample = self._cuts[kind] = self._cut(kind)
        if cut_sample is None:
            return None
        parts, marked = cut_sample
        parts = parts.copy()
        for i in marked:
            part = parts[i]
            filled = self._filled.get(part)
            if filled is None:
                # `created` first: its marker's digits might be in the id, never the reverse.
                filled = part.replace(_CREATED_BYTES, self._created).replace(_ID_BYTES, self._id)
                self._filled[part] = filled
            parts[i] = filled
        return parts

    def _cut(self, kind: str) -> tuple[list[bytes], tuple[int, ...]] | None:
        sample, holes = _sample(kind)
        encoded = event(self.chunks.build(_ID_MARK, _CREATED_MARK, sample))
        if encoded.count(_ID_BYTES) != 1 or encoded.count(_CREATED_BYTES) != 1:
            return None
        parts = cut(encoded, holes)
        if parts is None:
            return None
        marked = tuple(i for i, p in enumerate(parts) if _ID_BYTES in p or _CREATED_BYTES in p)
        return parts, marked

    def text_around(self, index: int) -> tuple[bytes, bytes] | None:
        """What goes before and after a text of choice `index`; None where the texts'
        chunks must be built."""
        return self._around("text", index)

    def reasoning_around(self, index: int) -> tuple[bytes, bytes] | None:
        """What goes before and after a piece of thinking of choice `index`; None where
        the thinking's chunks must be built."""
        return self._around("reasoning", index)

    def _around(self, kind: str, index: int) -> tuple[bytes, bytes] | None:
        try:  # one lookup per chunk once the kind's parts are cut
            parts = self._deltas[kind]
        except KeyError:
            parts = self._deltas[kind] = self._own(kind)
        if parts is None:
            return None
        return b"%s%d%s" % (parts[0], index, parts[1]), parts[2]

    def arguments(self, item: ArgumentsDelta) -> bytes:
        """A piece of a call's arguments."""
        if not self._arguments_cut:
            self._arguments, self._arguments_cut = self._own("arguments"), True
        parts = self._arguments
        if parts is None:
            return event(self.chunks.of(item))
        return b"%s%d%s%d%s%s%s" % (
            parts[0],
            item.index,
            parts[1],
            item.call,
            parts[2],
            json_text(item.text),
            parts[3],
        )

    def encode(self, item: Opening | Finish | Usage) -> bytes:
        """An opening, a finish or the usage."""
        if isinstance(item, Usage):
            parts = self._usage
            if parts is None:
                parts = self._usage = self._own("usage")
            if parts is None:
                return event(self.chunks.of(item))
            return b"%s%d%s%d%s%d%s%d%s" % (
                parts[0],
                item.prompt_tokens,
                parts[1],
                item.completion_tokens,
                parts[2],
                item.total_tokens,
                parts[3],
                item.cached_tokens,
                parts[4],
            )
        if isinstance(item, Opening):
            parts = self._opening
            if parts is None:
                parts = self._opening = self._own("opening")
        else:
            try:
                parts = self._finishes[item.reason]
            except KeyError:
                parts = self._finishes[item.reason] = self._own("finish " + item.reason)
        if parts is None:
            return event(self.chunks.of(item))
        return b"%s%d%s" % (parts[0], item.index, parts[1])
