"""The interface of a model's output parsers: tool calls and thinking read from its text as
it streams, and gpt-oss's harmony.

vLLM's parsers (`engine/vllm/parsing.py`, `reasoning.py`, `harmony.py`) implement it; the
dialects reach them only through these types, so nothing above the engine imports vllm.
One `OutputParsing` (or `ReasoningParsing`) serves a model (its parser class and tokenizer,
checked once); its `new` makes the parser of one choice of one request, which keeps that
choice's state.
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


class ReasoningParsing(abc.ABC):
    """A model's reasoning parser, by its name (vLLM's `--reasoning-parser`)."""

    name: str

    @abc.abstractmethod
    def new(self, template_kwargs: dict[str, Any]) -> Any:
        """The parser of one choice, made with the request's chat template kwargs (some
        parsers think only when asked): vLLM's `ReasoningParser` interface,
        `extract_reasoning_streaming` for each delta and `extract_reasoning` for a whole
        answer."""

    def added_tokens(self) -> Mapping[str, int]:
        """The tokens the model's vocabulary adds (special ones included), by text: where
        the parser's marker tokens are."""
        return {}


@dataclass(frozen=True)
class HarmonyPrompt:
    """A chat request rendered with harmony (gpt-oss): its prompt's ids, their text with
    the special tokens written out, and the request as the engine's parser reads it."""

    token_ids: list[int]
    text: str
    request: Any


class HarmonyParsing(abc.ABC):
    """gpt-oss's harmony format, rendered and read as the engine's server does it."""

    @abc.abstractmethod
    def render(self, request: dict[str, Any]) -> HarmonyPrompt:
        """The prompt of the chat request `request` (as JSON); raises
        `InvalidRequestError` for what harmony refuses."""

    @abc.abstractmethod
    def new(self, prompt: HarmonyPrompt, *, reasoning: bool, tools: bool) -> Any:
        """The harmony parser of one choice of `prompt`'s request (vLLM's `HarmonyParser`),
        its thinking read if `reasoning`, its calls if `tools`."""
