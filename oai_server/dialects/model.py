"""One served model's dialect: its family and the parsers it speaks, worked out once.

A model's family is detected once, from its chat template, its tokenizer's special tokens
and its architectures, when its engine is ready; from that and the server's settings
(`--tool-call-parser`, `--reasoning-parser`, a models-file entry's own tool-call parser,
which win over the family's) come its tool-call parser, its reasoning parser and, for
gpt-oss, harmony, each built through the engine's interface (`engine.protocol.Tokenizer`).
`ModelDialects` holds each model's, and the services ask it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from oai_server.dialects.detect import Dialect, ModelTraits, detect
from oai_server.dialects.harmony import Harmony, harmony_of
from oai_server.dialects.reasoning.selection import AUTO, Reasoner
from oai_server.dialects.reasoning.selection import choose as choose_reasoner
from oai_server.dialects.tool_calls.selection import ToolParsing
from oai_server.dialects.tool_calls.selection import choose as choose_tools
from oai_server.engine.protocol import Engine


@dataclass(frozen=True)
class ModelDialect:
    """A model's family (None: none recognised) and how its output is read: its tool
    calls (`tools`), its thinking (`reasoner`, None: all content), or harmony for both."""

    family: Dialect | None
    tools: ToolParsing
    reasoner: Reasoner | None = None
    harmony: Harmony | None = None

    def describe(self) -> str:
        """For the ready line: `tool calls: hermes (built-in), reasoning: think (built-in)
        (generic-think)`; a harmony model's, `harmony: ...`."""
        if self.harmony is not None:
            return self.harmony.describe()
        reasoner = "" if self.reasoner is None else f", reasoning: {self.reasoner.name}"
        family = "" if self.family is None else f" ({self.family.family})"
        return f"tool calls: {self.tools.name}{reasoner}{family}"


def resolve(engine: Engine, tool_call_parser: str, reasoning_parser: str) -> ModelDialect:
    """The dialect of `engine`'s model (its engine started), read with the settings
    `tool_call_parser` and `reasoning_parser` (`auto`, `none` or one of vLLM's names)."""
    tokenizer = engine.tokenizer
    traits = ModelTraits(
        tokenizer.chat_template_source() or "",
        tokenizer.special_tokens(),
        engine.model_info.architectures,
    )
    family = detect(traits)
    tools = choose_tools(tool_call_parser, family, tokenizer)
    harmony = harmony_of(family, tokenizer, reasoning_parser, tool_call_parser)
    if harmony is not None:  # its harmony parser reads the thinking
        return ModelDialect(family, tools, None, harmony)
    return ModelDialect(family, tools, choose_reasoner(reasoning_parser, family, tokenizer))


@dataclass
class ModelDialects:
    """Each served model's dialect, resolved once, when its engine is ready (the ready
    line asks for each chat model's), and kept for every request after."""

    engine: Engine
    tool_call_parser: str = "auto"
    reasoning_parser: str = AUTO
    # A models file's entries may set their own tool-call parser.
    per_model: Mapping[str, str] = field(default_factory=dict)
    _resolved: dict[str, ModelDialect] = field(default_factory=dict)

    def of(self, model: str) -> ModelDialect:
        """The dialect of the chat model `model` (a base model's name)."""
        resolved = self._resolved
        if model in resolved:  # every request asks: no call more than it must
            return resolved[model]
        setting = self.per_model.get(model, self.tool_call_parser)
        found = resolve(self.engine.serving(model), setting, self.reasoning_parser)
        resolved[model] = found
        return found
