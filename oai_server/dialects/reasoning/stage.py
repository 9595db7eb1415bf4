"""One choice's text split into reasoning and content, as it streams.

vLLM's reasoning parsers (`--reasoning-parser`, by vLLM's names) are used as they are:
`extract_reasoning_streaming` is fed the text and token ids so far at each delta, as
`vllm serve`'s chat service feeds it, and what it calls content goes on to the tool-call
parser. The tokens of a delta that is reasoning only count as reasoning tokens (vLLM's
`count_reasoning_tokens` finds none where the model never writes the opening tag, as
DeepSeek-R1's distills do).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from oai_server.dialects.gate import EVERY_DELTA, Markers, passed
from oai_server.dialects.reasoning.tags import ThinkTags
from oai_server.engine.token_ids import TokenIds, TokenIdsView

logger = logging.getLogger(__name__)


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
    a copy and a scan per delta made an answer's cost grow with its length squared. A
    delta that cannot hold a marker (`markers`), after the parser gave the delta before it
    back unchanged, all thinking or all content, is split the same without it, and reaches
    the parser with the next delta it is given (`oai_server.dialects.gate`).
    """

    parser: Any
    markers: Markers = EVERY_DELTA
    text: str = ""
    token_ids: TokenIds = field(default_factory=TokenIds)
    reasoning_tokens: int = 0
    # The ids up to the parser's last delta: the next delta's `previous_token_ids`.
    _seen: TokenIdsView = field(init=False)
    # What the parser last gave back unchanged: thinking (True), content (False), or None
    # (the next delta goes to the parser). A quiet delta is the same (`wait`).
    echo: bool | None = None
    # The deltas split without the parser since its last delta.
    _missed: list[str] = field(default_factory=list)
    _missed_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._seen = self.token_ids.view()

    def wait(self, text: str, token_ids: Sequence[int], token_count: int) -> None:
        """Take a delta that can hold no marker, while the parser echoes (`echo`), as what
        it echoes, without the parser: it reads the delta with the next one it is fed."""
        self._missed.append(text)
        # The ids join the record with the next delta the parser reads.
        self._missed_ids += token_ids
        if self.echo:
            self.reasoning_tokens += token_count

    def feed(self, text: str, token_ids: Sequence[int], token_count: int) -> Split:
        echo = self.echo
        if echo is not None and self.markers.quiet(text, token_ids):
            self.wait(text, token_ids, token_count)
            return Split(text, "") if echo else Split("", text)
        missed = "".join(self._missed)
        delta_text, delta_ids = missed + text, token_ids
        if self._missed_ids:
            delta_ids = self._missed_ids + list(token_ids)
        self._missed, self._missed_ids = [], []
        previous_text, previous_ids = self.text, self._seen
        self.text = current_text = previous_text + delta_text
        self.token_ids.extend(delta_ids)
        self._seen = current_ids = self.token_ids.view()
        message = self.parser.extract_reasoning_streaming(
            previous_text, current_text, delta_text, previous_ids, current_ids, delta_ids
        )
        reasoning = content = ""
        if message is not None:  # None: a tag alone, nothing to send
            reasoning, content = message.reasoning or "", message.content or ""
        if missed:
            reasoning, content = self._unsent(reasoning, content, missed)
        if text and reasoning == text and not content:
            self.echo = True
        elif text and content == text and not reasoning:
            self.echo = False
        else:
            self.echo = None
        # A token whose text is still held back by the detokenizer is the thinking's too.
        if not content and (reasoning or not text):
            self.reasoning_tokens += token_count
        return Split(reasoning, content)

    def _unsent(self, reasoning: str, content: str, sent: str) -> tuple[str, str]:
        """The split less `sent`, the start of its thinking or content that went out."""
        rest = passed(reasoning if self.echo else content, sent)
        if rest is None:  # the parser's family belongs in `gate.PER_TOKEN`
            logger.warning("reasoning parser gave back other than the text sent unparsed")
            return reasoning, content
        return (rest, content) if self.echo else (reasoning, rest)

    def finish(self) -> Split:
        """What the parser still holds at the end of the stream. vLLM's interface has no
        end: only the built-in `think` parser holds anything back (a possible tag)."""
        if isinstance(self.parser, ThinkTags):
            return Split(*self.parser.rest())
        return Split("", "")

    def whole(self, text: str, request: Any) -> tuple[str | None, str | None]:
        """vLLM's split of a whole answer (what the streamed splits add up to)."""
        result: tuple[str | None, str | None] = self.parser.extract_reasoning(text, request)
        return result
