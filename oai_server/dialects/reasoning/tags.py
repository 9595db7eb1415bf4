"""The built-in reasoning parser of a generic thinking model: thinking is what the model
writes between `<think>` and `</think>`, and only that.

vLLM 0.32's parsers for `<think>` (deepseek_r1, qwen3 and their kin) read an answer that
has no tags as thinking, right for a model whose prompt opens `<think>`, wrong for one that
writes both tags and may answer without them (`detect._generic_thinking` tells the two
apart). It speaks vLLM's reasoning-parser interface, so the reasoning stage feeds it as it
feeds theirs; a tag split across deltas is held back until it is whole or is not a tag.
(vLLM's interface has no end of stream: `rest`, asked by the reasoning stage at the end,
gives back what is held, so a streamed answer that ends on the start of a tag, a lone `<`
say, keeps it, as the whole answer does.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

OPEN, CLOSE = "<think>", "</think>"


@dataclass(frozen=True, slots=True)
class TagsDelta:
    """A delta's thinking and answer, as vLLM's `DeltaMessage` carries them."""

    reasoning: str | None = None
    content: str | None = None


def _held(text: str, tag: str) -> int:
    """How many characters at the end of `text` may be the start of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ThinkTags:
    """One choice's parser: each delta's text split at the tags, in order."""

    def __init__(self) -> None:
        self._inside = False
        self._held = ""

    def _split(self, text: str, *, final: bool) -> tuple[str, str]:
        reasoning, content, text = "", "", self._held + text
        while True:
            tag = CLOSE if self._inside else OPEN
            at = text.find(tag)
            cut = at if at >= 0 else len(text) - (0 if final else _held(text, tag))
            if self._inside:
                reasoning += text[:cut]
            else:
                content += text[:cut]
            if at < 0:
                self._held = text[cut:]
                return reasoning, content
            self._inside = not self._inside
            text = text[at + len(tag) :]

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> TagsDelta | None:
        reasoning, content = self._split(delta_text, final=False)
        if not reasoning and not content:
            return None  # a tag, or part of one: nothing to send yet
        return TagsDelta(reasoning or None, content or None)

    def rest(self) -> tuple[str, str]:
        """What is held back at the end of the stream, as thinking and answer: no tag."""
        return self._split("", final=True)

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        reasoning, content = ThinkTags()._split(model_output, final=True)
        return reasoning or None, content or None
