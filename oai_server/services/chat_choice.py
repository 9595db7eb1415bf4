"""One chat choice's output: parser events turned into stream deltas and a final message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from oai_server.engine.types import FinishReason, TokenLogprob
from oai_server.services.common import finish_reason
from oai_server.tool_calls.parsers import CallStart, Content, Event, OutputParser
from schemas.chat import (
    ChatCompletionDelta,
    ChatCompletionMessage,
    ChatCompletionMessageToolCall,
    ChatCompletionMessageToolCallChunk,
    FunctionCallChunk,
    FunctionCallOut,
)


@dataclass
class ChoiceState:
    """Everything said so far in one choice; fed text, it returns the events to send."""

    parser: OutputParser
    content: str = ""
    calls: list[ChatCompletionMessageToolCall] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)

    def feed(self, text: str) -> list[Event]:
        """Parse the next text; the events it makes are recorded and returned."""
        return self._record(self.parser.feed(text))

    def finish(self) -> list[Event]:
        return self._record(self.parser.finish())

    def _record(self, events: list[Event]) -> list[Event]:
        for event in events:
            if isinstance(event, Content):
                self.content += event.text
            elif isinstance(event, CallStart):
                self.calls.append(
                    ChatCompletionMessageToolCall(
                        id=event.id, function=FunctionCallOut(name=event.name, arguments="")
                    )
                )
            else:
                self.calls[event.index].function.arguments += event.text
        return events

    @staticmethod
    def delta(event: Event) -> ChatCompletionDelta:
        """The stream delta that carries `event`, as OpenAI streams it."""
        if isinstance(event, Content):
            return ChatCompletionDelta(content=event.text)
        if isinstance(event, CallStart):
            chunk = ChatCompletionMessageToolCallChunk(
                index=event.index,
                id=event.id,
                type="function",
                function=FunctionCallChunk(name=event.name, arguments=""),
            )
        else:
            chunk = ChatCompletionMessageToolCallChunk(
                index=event.index, function=FunctionCallChunk(arguments=event.text)
            )
        return ChatCompletionDelta(tool_calls=[chunk])

    def finish_reason(self, engine_reason: FinishReason) -> Literal["stop", "length", "tool_calls"]:
        reason = finish_reason(engine_reason)
        return "tool_calls" if reason == "stop" and self.calls else reason

    def message(self) -> ChatCompletionMessage:
        if self.calls:
            # As OpenAI answers a tool call: no text, the calls.
            return ChatCompletionMessage(
                content=self.content or None, refusal=None, tool_calls=self.calls, annotations=[]
            )
        return ChatCompletionMessage(content=self.content, refusal=None, annotations=[])
