"""One chat choice's output: parser events turned into stream deltas, and its finish reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from oai_server.dialects.harmony import HarmonyStage
from oai_server.dialects.reasoning.stage import Reasoning, ReasoningStage
from oai_server.dialects.tool_calls.parsers import (
    CallStart,
    Content,
    ContentOnly,
    Event,
    OutputParser,
)
from oai_server.engine.types import FinishReason
from oai_server.services.common import finish_reason
from schemas.chat import (
    ChatCompletionDelta,
    ChatCompletionMessageToolCallChunk,
    CustomCallChunk,
    FunctionCallChunk,
)


@dataclass
class ChoiceState:
    """The tool calls started so far in one choice; fed text, it returns the events to send.

    With a reasoning parser, its stage comes first, as in vLLM's chat service: the
    tool-call parser sees only what it calls content. A harmony model's (gpt-oss) stage
    reads thinking, content and calls at once, from the token ids, in place of both.
    """

    parser: OutputParser
    # The calls started so far: with one, a stop is `tool_calls` (their arguments go out
    # as they come, and are not kept: the answer's assembler sums them).
    calls: int = 0
    reasoning: ReasoningStage | None = None
    # False (the request's `include_reasoning`): the thinking is counted, not sent.
    show_reasoning: bool = True
    harmony: HarmonyStage | None = None

    @property
    def plain(self) -> bool:
        """Whether every piece of text is content as it comes (no tools, no reasoning)."""
        return self.reasoning is None and self.harmony is None and type(self.parser) is ContentOnly

    @property
    def reasoning_tokens(self) -> int:
        """The tokens of the choice's thinking so far."""
        if self.harmony is not None:
            return self.harmony.reasoning_tokens
        return 0 if self.reasoning is None else self.reasoning.reasoning_tokens

    def feed(
        self, text: str, token_ids: Sequence[int] = (), token_count: int = 0
    ) -> list[Event | Reasoning]:
        """Parse the next text; the events it makes are recorded and returned."""
        if self.harmony is not None:
            return self._record_harmony(self.harmony.feed(token_ids))
        if self.reasoning is None:
            return list(self._record(self.parser.feed(text, token_ids)))
        split = self.reasoning.feed(text, token_ids, token_count)
        events: list[Event | Reasoning] = []
        if split.reasoning and self.show_reasoning:
            events.append(Reasoning(split.reasoning))
        if split.content:
            # The ids are the content's only when the whole delta is (not when thinking or
            # its end tag came with it: the parser would read the tag's id as the content's).
            ids = token_ids if split.content == text else ()
            events += self._record(self.parser.feed(split.content, ids))
        return events

    def finish(self) -> list[Event | Reasoning]:
        if self.harmony is not None:
            return self._record_harmony(self.harmony.finish())
        return list(self._record(self.parser.finish()))

    def _record_harmony(self, events: list[Event | Reasoning]) -> list[Event | Reasoning]:
        self._record([e for e in events if not isinstance(e, Reasoning)])
        return events

    def _record(self, events: list[Event]) -> list[Event]:
        for event in events:
            if type(event) is CallStart:
                self.calls += 1
        return events

    @staticmethod
    def delta(event: Event | Reasoning) -> ChatCompletionDelta:
        """The stream delta that carries `event`, as OpenAI (and vLLM, for reasoning) streams it."""
        if isinstance(event, Reasoning):
            return ChatCompletionDelta(reasoning=event.text)
        if isinstance(event, Content):
            return ChatCompletionDelta(content=event.text)
        if isinstance(event, CallStart) and event.custom:
            chunk = ChatCompletionMessageToolCallChunk(
                index=event.index,
                id=event.id,
                type="custom",
                custom=CustomCallChunk(name=event.name, input=""),
            )
        elif isinstance(event, CallStart):
            chunk = ChatCompletionMessageToolCallChunk(
                index=event.index,
                id=event.id,
                type="function",
                function=FunctionCallChunk(name=event.name, arguments=""),
            )
        elif event.custom:
            chunk = ChatCompletionMessageToolCallChunk(
                index=event.index, custom=CustomCallChunk(input=event.text)
            )
        else:
            chunk = ChatCompletionMessageToolCallChunk(
                index=event.index, function=FunctionCallChunk(arguments=event.text)
            )
        return ChatCompletionDelta(tool_calls=[chunk])

    def finish_reason(self, engine_reason: FinishReason) -> Literal["stop", "length", "tool_calls"]:
        reason = finish_reason(engine_reason)
        return "tool_calls" if reason == "stop" and self.calls else reason
