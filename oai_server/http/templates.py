"""A stream's light events as SSE bytes, without building a chunk per event.

Most of a stream is light events (`oai_server.services.events`): a choice's next text,
and a plain choice's opening and finish. Building and serializing a pydantic chunk for
each was most of the server's own cost, per token and per request. Here each kind of
event's bytes are cut from a sample chunk that `Chunks.build` makes and serializes with
marker values (the answer's `id` and `created`, the event's index and text), once per
shape of answer (`Chunks.shape`: the endpoint, model, stream options and tier). An
answer splices its identity in once; an event, its values. The bytes are those of the
typed chunk by construction: the values are JSON-encoded by pydantic's own encoder.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence

import pydantic_core

from oai_server.services.events import Chunks, Finish, Light, Opening, TextDelta
from schemas.common import ResponseModel

# Values no real chunk carries, marking where a sample chunk's values sit.
_ID_MARK = "\x00oai-id\x00"
_CREATED_MARK = 987654320
_INDEX_MARK = 987654321
_TEXT_MARK = "\x00oai-text\x00"
_ID_BYTES = pydantic_core.to_json(_ID_MARK)
_CREATED_BYTES = b"%d" % _CREATED_MARK
_INDEX_BYTES = b"%d" % _INDEX_MARK
_TEXT_BYTES = pydantic_core.to_json(_TEXT_MARK)
# Shapes are few (a server's models, tiers, stream options): the bound only guards memory.
_MAX_CUTS = 1024

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


# (shape, kind of event) -> the sample's bytes cut at the event's values; None where
# the sample did not cut cleanly (its events are then encoded from their chunks).
_cuts: dict[tuple[Hashable, Hashable], list[bytes] | None] = {}


def _cut_sample(
    chunks: Chunks[ResponseModel], kind: Hashable, sample: Light, holes: Sequence[bytes]
) -> list[bytes] | None:
    key = (chunks.shape, kind)
    try:
        return _cuts[key]
    except KeyError:
        pass
    encoded = event(chunks.build(_ID_MARK, _CREATED_MARK, sample))
    parts = None
    if encoded.count(_ID_BYTES) == 1 and encoded.count(_CREATED_BYTES) == 1:
        parts = cut(encoded, holes)
    if len(_cuts) >= _MAX_CUTS:
        _cuts.clear()
    _cuts[key] = parts
    return parts


class LightEvents:
    """One answer's light events as SSE bytes."""

    def __init__(self, chunks: Chunks[ResponseModel]) -> None:
        self.chunks = chunks
        id_, created = chunks.identity
        self._id = pydantic_core.to_json(id_)
        self._created = b"%d" % created
        self._text: list[bytes] | None = None
        self._openings: list[bytes] | None = None
        self._finishes: dict[str, list[bytes] | None] = {}

    def _own(self, kind: Hashable, sample: Light, holes: Sequence[bytes]) -> list[bytes] | None:
        """The template of `kind`, with this answer's identity in it."""
        parts = _cut_sample(self.chunks, kind, sample, holes)
        if parts is None:
            return None
        # `created` first: the marker's digits might be in the answer's id, never the reverse.
        created, id_ = self._created, self._id
        return [part.replace(_CREATED_BYTES, created).replace(_ID_BYTES, id_) for part in parts]

    def text_around(self, index: int) -> tuple[bytes, bytes] | None:
        """What goes before and after a text of choice `index`; None where the texts'
        chunks must be built."""
        parts = self._text
        if parts is None:
            sample = TextDelta(_INDEX_MARK, _TEXT_MARK)
            parts = self._text = self._own("text", sample, (_INDEX_BYTES, _TEXT_BYTES))
            if parts is None:
                return None
        return b"%s%d%s" % (parts[0], index, parts[1]), parts[2]

    def encode(self, item: Opening | Finish) -> bytes:
        """An opening or a finish."""
        if isinstance(item, Opening):
            parts = self._openings
            if parts is None:
                sample = Opening(_INDEX_MARK)
                parts = self._openings = self._own("opening", sample, (_INDEX_BYTES,))
        else:
            try:
                parts = self._finishes[item.reason]
            except KeyError:
                finish = Finish(_INDEX_MARK, item.reason)
                parts = self._own(("finish", item.reason), finish, (_INDEX_BYTES,))
                self._finishes[item.reason] = parts
        if parts is None:
            return event(self.chunks.of(item))
        return b"%s%d%s" % (parts[0], item.index, parts[1])
