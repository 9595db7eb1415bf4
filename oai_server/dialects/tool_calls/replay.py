"""An own parser's way back to vLLM's: the text so far replayed, what went out kept.

An own streaming parser (`qwen3_coder.py`) reads only the shapes it is sure of, as vLLM's
parser would read them. On anything else it hands over: a new vLLM parser is fed the
deltas so far, as they came (so it ends where it would have been had it read them
itself), and from then on every delta; of what it gives back, the part of the content
and of each call's arguments that the own parser already sent is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from oai_server.engine.parsing import CallDelta, OutputTextParser, ParsedDelta

logger = logging.getLogger(__name__)


class Sent:
    """What an own parser sent so far: content, and each call's name and arguments."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.names: set[int] = set()
        self.arguments: dict[int, list[str]] = {}

    def add(self, delta: ParsedDelta | None) -> ParsedDelta | None:
        """Record `delta` as sent; `delta`, or None where it is empty."""
        if delta is None or (not delta.content and not delta.calls):
            return None
        if delta.content:
            self.content.append(delta.content)
        for call in delta.calls:
            if call.name is not None:
                self.names.add(call.index)
            if call.arguments:
                self.arguments.setdefault(call.index, []).append(call.arguments)
        return delta


class Replayed(OutputTextParser):
    """vLLM's parser (`make()`), taking over from an own parser that sent `sent` for the
    deltas `deltas`: what it gives back, less what was sent."""

    def __init__(
        self,
        make: Callable[[], OutputTextParser],
        deltas: Sequence[tuple[str, Sequence[int]]],
        sent: Sent,
    ) -> None:
        self._parser = make()
        self._content = "".join(sent.content)
        self._names = sent.names
        self._arguments = {i: "".join(parts) for i, parts in sent.arguments.items()}
        self._seen_content = 0
        self._seen_arguments: dict[int, int] = {}
        self.caught_up = ParsedDelta()
        for text, ids in deltas:
            self._merge(self._parser.feed(text, ids, finished=False))

    def feed(self, text: str, token_ids: Sequence[int], *, finished: bool) -> ParsedDelta | None:
        return self._unsent(self._parser.feed(text, token_ids, finished=finished))

    def whole(self, text: str) -> ParsedDelta:
        return self._parser.whole(text)

    def _merge(self, delta: ParsedDelta | None) -> None:
        """Add the unsent part of `delta` (what the replay gives) to `caught_up`."""
        rest = self._unsent(delta)
        if rest is None:
            return
        self.caught_up.content = (self.caught_up.content or "") + (rest.content or "") or None
        self.caught_up.calls += rest.calls

    def _unsent(self, delta: ParsedDelta | None) -> ParsedDelta | None:
        if delta is None:
            return None
        content = self._past(delta.content, self._content, self._seen_content)
        if delta.content:
            self._seen_content += len(delta.content)
        calls = []
        for call in delta.calls:
            name = None if call.index in self._names else call.name
            sent = self._arguments.get(call.index, "")
            seen = self._seen_arguments.get(call.index, 0)
            arguments = self._past(call.arguments, sent, seen)
            if call.arguments:
                self._seen_arguments[call.index] = seen + len(call.arguments)
            if name is not None or arguments:
                calls.append(CallDelta(call.index, call.id, name, arguments))
        if not content and not calls:
            return None
        return ParsedDelta(content, calls)

    @staticmethod
    def _past(text: str | None, sent: str, seen: int) -> str | None:
        """The part of `text` (vLLM's, after `seen` characters of it on that channel)
        beyond `sent`, what the own parser sent there."""
        if not text:
            return None
        end = seen + len(text)
        if end <= len(sent):
            if sent[seen:end] != text:
                logger.warning("own parser sent other than vLLM's parser gives: %r", text)
            return None
        cut = max(0, len(sent) - seen)
        if cut and sent[seen:] != text[:cut]:
            logger.warning("own parser sent other than vLLM's parser gives: %r", text[:cut])
        return text[cut:] or None
