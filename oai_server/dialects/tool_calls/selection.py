"""Which parser reads a model's tool calls for `tool_choice: "auto"`.

`--tool-call-parser auto` (the default) asks `dialects` which family the model is and
takes the parser `vllm serve` users would pass for it; a model of no family it knows is
served as before, by the built-in Hermes parser (`parsers.HermesCalls`), whose format the
tools prompt teaches a model whose template shows no tools. Any name in vLLM's registry
picks vLLM's parser by that name; `none` refuses `auto`. Chosen once per model, when its
dialect is resolved (`dialects.model`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from oai_server.dialects.detect import Dialect
from oai_server.engine.parsing import OutputParsing
from oai_server.engine.protocol import Tokenizer

logger = logging.getLogger(__name__)

BUILTIN_HERMES = "hermes (built-in)"


@dataclass(frozen=True)
class ToolParsing:
    """How a model's tool calls are read.

    `parsing` is vLLM's parser; with none, `builtin` says whether the built-in Hermes
    parser serves `auto`, and `refusal` why `auto` is refused otherwise."""

    name: str
    parsing: OutputParsing | None = None
    builtin: bool = False
    refusal: str = ""


def choose(setting: str, dialect: Dialect | None, tokenizer: Tokenizer) -> ToolParsing:
    """The parsing `setting` (`auto`, `none` or a vLLM parser's name) gives the model of
    `dialect` (None: of no family recognised) over `tokenizer`."""
    if setting == "none":
        refusal = "the server was started with --tool-call-parser none"
        return ToolParsing("none", refusal=refusal)
    name = setting
    if setting == "auto":
        if dialect is None or dialect.tool_call_parser is None:
            return ToolParsing(BUILTIN_HERMES, builtin=True)
        name = dialect.tool_call_parser
    try:
        return ToolParsing(name, tokenizer.output_parsing(name))
    except ValueError as exc:
        if setting == "auto" or name == "hermes":
            # Recognised, but the tokenizer lacks what vLLM's parser needs (or, for
            # hermes, has no vocabulary to give it): served as before.
            logger.warning("tool-call parser %s cannot serve this model (%s)", name, exc)
            return ToolParsing(BUILTIN_HERMES, builtin=True)
        return ToolParsing(name, refusal=f"tool-call parser {name}: {exc}")
