"""One chat choice's output: parser events turned into stream deltas, and its finish reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from oai_server.dialects.gate import Markers
from oai_server.dialects.harmony import HarmonyStage
from oai_server.dialects.reasoning.stage import Reasoning, ReasoningStage, Split
from oai_server.dialects.tool_calls.parsers import (
    CallStart,
    Content,
    ContentOnly,
    EngineCalls,
    Event,
    OutputParser,
)
from oai_server.engine.types import ChoiceDelta, FinishReason, TextDelta
from oai_server.services.common import finish_reason
from oai_server.services.events import ArgumentsDelta, ReasoningDelta
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
    # Where the markers of the parsers a delta passes can be, where a quiet delta may pass
    # them (`passing`): with vLLM's tool-call parser (`_calls`), or none, behind thinking's.
    _markers: Markers | None = field(default=None, init=False)
    _calls: EngineCalls | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        parser, reasoning = self.parser, self.reasoning
        calls = parser if type(parser) is EngineCalls else None
        if self.harmony is not None or (calls is None and type(parser) is not ContentOnly):
            return
        markers = None if reasoning is None else reasoning.markers
        if calls is not None:
            markers = calls.markers if markers is None else markers & calls.markers
        if markers is not None and markers.gated:
            self._markers, self._calls = markers, calls

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
        # The ids are the content's only when the whole delta is (not when thinking or its
        # end tag came with it: the parser would read the tag's id as the content's).
        return self._split(split, token_ids if split.content == text else ())

    def _split(self, split: Split, content_ids: Sequence[int]) -> list[Event | Reasoning]:
        """The events of the reasoning stage's `split`: its content through the parser."""
        events: list[Event | Reasoning] = []
        if split.reasoning and self.show_reasoning:
            events.append(Reasoning(split.reasoning))
        if split.content:
            events += self._record(self.parser.feed(split.content, content_ids))
        return events

    def passing(self, d: ChoiceDelta) -> TextDelta | ReasoningDelta | ArgumentsDelta | None:
        """`d`'s light event where no parser need read it now (None: `feed` it): it can
        hold no marker and each parser on its way gave the delta before it back unchanged,
        as thinking, content or one call's arguments, so it is the same. Asked first, it
        takes such a delta from the engine's step to its event in a few calls, where `feed`
        goes through the parsers' events (a chunk of thinking 28 calls, against a text
        chunk's 11)."""
        markers = self._markers
        if markers is None or not markers.quiet(d.text, d.token_ids):
            return None
        reasoning = self.reasoning
        if reasoning is not None:
            thinking = reasoning.echo
            if thinking is None or (thinking and not self.show_reasoning):
                return None
            if thinking:
                reasoning.wait(d.text, d.token_ids, d.token_count)
                return ReasoningDelta(d.index, d.text)
        calls = self._calls
        call = -1 if calls is None else calls.echo
        if call is None or (calls is not None and call >= 0 and call not in calls.ids):
            return None
        if reasoning is not None:
            reasoning.wait(d.text, d.token_ids, d.token_count)
        if calls is not None:
            calls.wait(d.text, d.token_ids)
        return d if call < 0 else ArgumentsDelta(d.index, call, d.text)

    def finish(self) -> list[Event | Reasoning]:
        if self.harmony is not None:
            return self._record_harmony(self.harmony.finish())
        events = [] if self.reasoning is None else self._split(self.reasoning.finish(), ())
        return events + self._record(self.parser.finish())

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
