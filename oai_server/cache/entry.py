"""A cache entry: the events of one answer, and its usage, encoded as JSON.

The entry is what a stream sends, not a whole response: chunks without their `id`,
`created` and `usage` (a replay gives them its own), and the light events as lists:
plain text as `[index, text]`, at the granularity the engine produced it, a choice's
thinking as `[index, null, null, text]`, a piece of its call `call`'s arguments as
`[index, call, text]`, its opening as `[index]`, its plain finish as `[index, null,
reason]`. (Entries of another `FORMAT` are a miss.) A streamed replay
sends these events again; a whole response is their fold by the service's own
assembler. So either kind of request fills an entry that serves both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
import pydantic_core

from oai_server.http.templates import json_text
from oai_server.services.events import (
    ArgumentsDelta,
    Finish,
    Light,
    Opening,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from schemas.common import ResponseModel

logger = logging.getLogger(__name__)

FORMAT = 3  # 2: openings and finishes as lists; 3: a call's arguments as one
_NOT_STORED = {"id", "created", "usage"}


@dataclass(frozen=True)
class Entry:
    """A decoded entry: chunks carry an empty `id` and `created` 0 until replayed."""

    events: list[Light | ResponseModel]
    prompt_tokens: int
    completion_tokens: int
    # Of the completion tokens, the thinking's (None: answered without a reasoning parser).
    reasoning_tokens: int | None = None

    @property
    def counts(self) -> Usage:
        """What a hit reports: the answer's own counts, its whole prompt cached."""
        return Usage(
            self.prompt_tokens, self.completion_tokens, self.prompt_tokens, self.reasoning_tokens
        )


def encode(events: Sequence[Light | ResponseModel], usage: Usage) -> bytes:
    """The entry for a stream's `events`; a chunk that only reports usage is left out.

    Each event is encoded once, straight to its JSON, and the entry is their join: the
    bytes of `{"format": ..., "events": [...], "usage": [...]}`; the usage is
    `[prompt_tokens, completion_tokens]`, and the reasoning tokens after them where counted.
    """
    counts = b"%d,%d" % (usage.prompt_tokens, usage.completion_tokens)
    if usage.reasoning_tokens is not None:
        counts += b",%d" % usage.reasoning_tokens
    stored = [
        b"[%d,%s]" % (event.index, json_text(event.text))  # most events: inline
        if isinstance(event, TextDelta)
        else _stored(event)
        for event in events
    ]
    return b"".join(
        (
            b'{"format":%d,"events":[' % FORMAT,
            b",".join(part for part in stored if part is not None),
            b'],"usage":[%s]}' % counts,
        )
    )


def _stored(
    event: ReasoningDelta | ArgumentsDelta | Opening | Finish | Usage | ResponseModel,
) -> bytes | None:
    """An event other than text as stored; None for the usage that ends a stream (the
    entry keeps the counts once, and a replay reports its own)."""
    if isinstance(event, Opening):
        return b"[%d]" % event.index
    if isinstance(event, Finish):
        return pydantic_core.to_json([event.index, None, event.reason])
    if isinstance(event, Usage):
        return None
    if isinstance(event, ReasoningDelta):
        return b"[%d,null,null,%s]" % (event.index, json_text(event.text))
    if isinstance(event, ArgumentsDelta):
        return b"[%d,%d,%s]" % (event.index, event.call, json_text(event.text))
    chunk = event
    if getattr(chunk, "usage", None) is not None and not getattr(chunk, "choices", True):
        return None
    return chunk.__pydantic_serializer__.to_json(chunk, exclude_unset=True, exclude=_NOT_STORED)


def decode(data: bytes, restore: Callable[[dict[str, Any]], ResponseModel]) -> Entry | None:
    """The entry in `data`, every chunk validated by `restore` (the endpoint's); None (a
    miss) if it does not decode."""
    try:
        raw = pydantic_core.from_json(data)
        if raw["format"] != FORMAT:
            return None
        prompt_tokens, completion_tokens, *reasoning = raw["usage"]
        events = [
            _light(item) if isinstance(item, list) else restore(item) for item in raw["events"]
        ]
        counts = (prompt_tokens, completion_tokens, *reasoning)
        if len(reasoning) > 1 or not all(isinstance(n, int) for n in counts):
            raise TypeError("usage is [prompt_tokens, completion_tokens(, reasoning_tokens)]")
    except (ValueError, TypeError, KeyError, pydantic.ValidationError) as exc:
        logger.warning("response cache: an entry did not decode (%r); treated as a miss", exc)
        return None
    return Entry(events, prompt_tokens, completion_tokens, reasoning[0] if reasoning else None)


def _light(item: list[Any]) -> Light:
    if len(item) == 2 and type(item[0]) is int and isinstance(item[1], str):
        return TextDelta(item[0], item[1])
    if len(item) == 1 and type(item[0]) is int:
        return Opening(item[0])
    if len(item) == 3 and type(item[0]) is int and item[1] is None and isinstance(item[2], str):
        return Finish(item[0], item[2])
    if (
        len(item) == 4
        and type(item[0]) is int
        and item[1] is item[2] is None
        and isinstance(item[3], str)
    ):
        return ReasoningDelta(item[0], item[3])
    if len(item) == 3 and type(item[0]) is type(item[1]) is int and isinstance(item[2], str):
        return ArgumentsDelta(item[0], item[1], item[2])
    raise TypeError(
        "a light event is [index, text], [index, null, null, text], [index, call, text], "
        "[index] or [index, null, reason]"
    )
