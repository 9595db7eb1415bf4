"""One choice's text split into reasoning and content, as it streams.

vLLM's reasoning parsers (`--reasoning-parser`, by vLLM's names) are used as they are:
`extract_reasoning_streaming` is fed the text and token ids so far at each delta, as
`vllm serve`'s chat service feeds it, and what it calls content goes on to the tool-call
parser. The tokens of a delta that is reasoning only count as reasoning tokens (vLLM's
`count_reasoning_tokens` finds none where the model never writes the opening tag, as
DeepSeek-R1's distills do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from oai_server.engine.token_ids import TokenIds, TokenIdsView


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A piece of the model's thinking (an event beside the tool parser's)."""

    text: str


@dataclass(frozen=True, slots=True)
class Split:
    """A delta's text: what is reasoning, what is the answer's content."""

    reasoning: str
    content: str


@dataclass
class ReasoningStage:
    """vLLM's reasoning parser for one choice; `feed` splits each delta.

    The ids so far reach the parser as views of one growing record (`TokenIds`), not as a
    new list per delta: its look-ups for its tags then cost the same at every token, where
    a copy and a scan per delta made an answer's cost grow with its length squared.
    """

    parser: Any
    text: str = ""
    token_ids: TokenIds = field(default_factory=TokenIds)
    reasoning_tokens: int = 0
    # The ids up to the last delta: the next delta's `previous_token_ids`.
    _seen: TokenIdsView = field(init=False)

    def __post_init__(self) -> None:
        self._seen = self.token_ids.view()

    def feed(self, text: str, token_ids: Sequence[int], token_count: int) -> Split:
        previous_text, previous_ids = self.text, self._seen
        self.text = current_text = previous_text + text
        self.token_ids.extend(token_ids)
        self._seen = current_ids = self.token_ids.view()
        message = self.parser.extract_reasoning_streaming(
            previous_text, current_text, text, previous_ids, current_ids, token_ids
        )
        if message is None:  # a tag alone: nothing to send
            return Split("", "")
        reasoning, content = message.reasoning or "", message.content or ""
        # A token whose text is still held back by the detokenizer is the thinking's too.
        if not content and (reasoning or not text):
            self.reasoning_tokens += token_count
        return Split(reasoning, content)

    def whole(self, text: str, request: Any) -> tuple[str | None, str | None]:
        """vLLM's split of a whole answer (what the streamed splits add up to)."""
        result: tuple[str | None, str | None] = self.parser.extract_reasoning(text, request)
        return result
