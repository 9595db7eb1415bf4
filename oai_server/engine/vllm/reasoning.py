"""vLLM's reasoning parsers (`vllm.reasoning`), by the names `vllm serve --reasoning-parser` takes.

vllm is imported here only when a parser is named, never when the server is imported.
"""

from __future__ import annotations

from typing import Any


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
