"""vLLM's reasoning parsers (`vllm.reasoning`), by the names `vllm serve --reasoning-parser` takes.

vllm is imported here only when a parser is named, never when the server is imported.
`VLLMReasoningParsing` serves them behind `engine/parsing.py`'s interface.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from oai_server.engine.parsing import ReasoningParsing
from oai_server.engine.vllm.parsing import added_tokens


def reasoning_parser_names() -> list[str]:
    """Every name in vLLM's reasoning-parser registry."""
    from vllm.reasoning import ReasoningParserManager

    return list(ReasoningParserManager.list_registered())


def check_reasoning_parser(name: str) -> None:
    """Refuse, in one line, a name that is none of vLLM's reasoning parsers."""
    names = reasoning_parser_names()
    if name not in names:
        raise ValueError(f"{name!r} is not a vLLM reasoning parser (valid: {', '.join(names)})")


def reasoning_parser_class(name: str) -> Any:
    """vLLM's parser class registered as `name` (its module is imported on first use)."""
    from vllm.reasoning import ReasoningParserManager

    return ReasoningParserManager.get_reasoning_parser(name)


class _SharedVocab:
    """The model's tokenizer, with its vocabulary read once, not once per parser: vLLM's
    parsers look their tags up in `get_vocab()`, a new dict of the whole vocabulary."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    @cached_property
    def _vocab(self) -> dict[str, int]:
        return dict(self._tokenizer.get_vocab())

    def get_vocab(self) -> dict[str, int]:
        return self._vocab

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


class VLLMReasoningParsing(ReasoningParsing):
    """vLLM's reasoning parser `name` over `tokenizer` (a Hugging Face tokenizer's
    interface); raises `ValueError` if the tokenizer lacks the tokens the parser needs."""

    def __init__(self, name: str, tokenizer: Any) -> None:
        self.name = name
        self._tokenizer = _SharedVocab(tokenizer)
        try:
            self._cls = reasoning_parser_class(name)
            self._cls(self._tokenizer)
        except (RuntimeError, ValueError, KeyError) as exc:  # as vLLM's parsers raise
            raise ValueError(str(exc)) from None

        self._added = added_tokens(tokenizer)

    def added_tokens(self) -> Mapping[str, int]:
        return self._added

    def new(self, template_kwargs: dict[str, Any]) -> Any:
        return self._cls(self._tokenizer, chat_template_kwargs=template_kwargs)
