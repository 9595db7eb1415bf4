"""The interface of a model's output parser: tool calls read from its text as it streams.

vLLM's parsers (`engine/vllm/parsing.py`) implement it; the chat service reaches them only
through these types, so it never imports vllm. One `OutputParsing` serves a model (its
parser class and tokenizer, checked once); `OutputParsing.new` makes the parser of one
choice of one request, which keeps that choice's state.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class CallDelta:
    """A piece of one tool call: its id and name first, then fragments of its arguments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


@dataclass(slots=True)
class ParsedDelta:
    """What a piece of generated text turned out to be: content, and pieces of calls."""

    content: str | None = None
    calls: list[CallDelta] = field(default_factory=list)


class OutputTextParser(abc.ABC):
    """One choice's parser: fed the text as it streams, or the whole text at once."""

    @abc.abstractmethod
    def feed(self, text: str, token_ids: Sequence[int], *, finished: bool) -> ParsedDelta | None:
        """The next piece of streamed text and its token ids (empty: the parser encodes
        the text); `finished` on the last (which may be empty)."""

    @abc.abstractmethod
    def whole(self, text: str) -> ParsedDelta:
        """A whole answer at once, as a non-streamed answer is parsed (each call complete)."""


class OutputParsing(abc.ABC):
    """A model's tool-call parser, by its name (vLLM's `--tool-call-parser`)."""

    name: str

    @abc.abstractmethod
    def new(self, request: dict[str, Any]) -> OutputTextParser:
        """The parser of one choice of `request` (a chat request, as JSON)."""

    def added_tokens(self) -> Mapping[str, int]:
        """The tokens the model's vocabulary adds (special ones included), by text: where a
        family's marker tokens are."""
        return {}
