"""Which parser tells a model's thinking apart from its answer.

`--reasoning-parser auto` (the default) takes the parser the model's family thinks with
(`dialects.detect`): vLLM's by its name, or for a generic thinking model the built-in
`think` (`tags.ThinkTags`); any name of vLLM's registry picks that one, `none` none. The
parser comes through the engine's interface (`Tokenizer.reasoning_parsing`), built once
per model when its dialect is resolved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oai_server.dialects.detect import THINK_TAGS, Dialect
from oai_server.dialects.gate import Markers, markers_of
from oai_server.dialects.reasoning.stage import ReasoningStage
from oai_server.dialects.reasoning.tags import ThinkTags
from oai_server.engine.protocol import Tokenizer

logger = logging.getLogger(__name__)

# The names the setting takes besides vLLM's: `auto` picks the model's own.
AUTO = "auto"
NONE = "none"
BUILTIN_THINK = f"{THINK_TAGS} (built-in)"


@dataclass(frozen=True)
class Reasoner:
    """Makes the reasoning stage of each choice of a model, for a parser named as vLLM names it.

    `make` takes the request's chat template kwargs, as `vllm serve` gives them to the
    parser it makes per request: some parsers think only when asked (DeepSeek V3.1's
    `thinking`)."""

    name: str
    make: Callable[[dict[str, Any] | None], ReasoningStage]
    # The built-in parser reads the tags in the text: where they are special tokens, the
    # detokenizer would leave them out unless told to keep them.
    keep_special_tokens: bool = False


def choose(setting: str, dialect: Dialect | None, tokenizer: Tokenizer) -> Reasoner | None:
    """The reasoning parser `setting` (vLLM's name, `auto` or `none`) gives the model of
    `dialect` over `tokenizer`; None: its whole answer is content."""
    name = setting
    if setting == AUTO:
        name = (dialect.reasoning_parser if dialect is not None else None) or NONE
    if name == NONE:
        return None
    if name == THINK_TAGS:
        # Its tags are text (kept, special tokens or not): a delta without `<` holds none.
        markers = Markers()
        return Reasoner(BUILTIN_THINK, lambda kwargs: ReasoningStage(ThinkTags(), markers), True)
    try:
        parsing = tokenizer.reasoning_parsing(name)
    except ValueError as exc:
        # A family recognised (or a parser named) whose tokenizer lacks the parser's
        # tokens: served as text, and the log says why.
        logger.warning("reasoning parser %s not used: %s", name, exc)
        return None
    markers = markers_of(parsing.added_tokens(), name)
    return Reasoner(name, lambda kwargs: ReasoningStage(parsing.new(kwargs or {}), markers))
