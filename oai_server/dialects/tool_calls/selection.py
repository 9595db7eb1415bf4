"""Which parser reads a model's tool calls for `tool_choice: "auto"`.

`--tool-call-parser auto` (the default) asks `dialects` which family the model is and
takes the parser `vllm serve` users would pass for it; a model of no family it knows is
served as before, by the built-in Hermes parser (`parsers.HermesCalls`), whose format the
tools prompt teaches a model whose template shows no tools. Any name in vLLM's registry
picks vLLM's parser by that name; `none` refuses `auto`. Chosen once per model, at start.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from oai_server.dialects import Dialect, ModelTraits, detect
from oai_server.engine.parsing import OutputParsing
from oai_server.engine.protocol import Engine

logger = logging.getLogger(__name__)

BUILTIN_HERMES = "hermes (built-in)"


@dataclass(frozen=True)
class ToolParsing:
    """A model's dialect (if recognised) and how its tool calls are read.

    `parsing` is vLLM's parser; with none, `builtin` says whether the built-in Hermes
    parser serves `auto`, and `refusal` why `auto` is refused otherwise."""

    name: str
    dialect: Dialect | None = None
    parsing: OutputParsing | None = None
    builtin: bool = False
    refusal: str = ""

    def describe(self) -> str:
        """For the ready line: `tool calls: llama3_json (llama-3)`."""
        family = f" ({self.dialect.family})" if self.dialect is not None else ""
        return f"tool calls: {self.name}{family}"


def choose(setting: str, engine: Engine) -> ToolParsing:
    """The parsing `setting` (`auto`, `none` or a vLLM parser's name) gives `engine`'s model."""
    tokenizer = engine.tokenizer
    traits = ModelTraits(
        tokenizer.chat_template_source() or "",
        tokenizer.special_tokens(),
        engine.model_info.architectures,
    )
    dialect = detect(traits)
    if setting == "none":
        refusal = "the server was started with --tool-call-parser none"
        return ToolParsing("none", dialect, refusal=refusal)
    name = setting
    if setting == "auto":
        if dialect is None or dialect.tool_call_parser is None:
            return ToolParsing(BUILTIN_HERMES, dialect, builtin=True)
        name = dialect.tool_call_parser
    try:
        return ToolParsing(name, dialect, tokenizer.output_parsing(name))
    except ValueError as exc:
        if setting == "auto" or name == "hermes":
            # Recognised, but the tokenizer lacks what vLLM's parser needs (or, for
            # hermes, has no vocabulary to give it): served as before.
            logger.warning("tool-call parser %s cannot serve this model (%s)", name, exc)
            return ToolParsing(BUILTIN_HERMES, dialect, builtin=True)
        return ToolParsing(name, dialect, refusal=f"tool-call parser {name}: {exc}")


@dataclass
class ToolParsers:
    """Each served model's parsing, chosen on first use (its engine started) and kept."""

    setting: str = "auto"
    # A models file's entries may set their own.
    per_model: dict[str, str] = field(default_factory=dict)
    _chosen: dict[str, ToolParsing] = field(default_factory=dict)

    def of(self, model: str, engine: Engine) -> ToolParsing:
        chosen = self._chosen.get(model)
        if chosen is None:
            chosen = choose(self.per_model.get(model, self.setting), engine)
            self._chosen[model] = chosen
        return chosen
