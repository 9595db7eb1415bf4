"""The whole chat answer as the sum of its streamed events.

A non-streamed chat completion is assembled from exactly the events a streamed one
sends, so the two cannot disagree, and every consumer of the events (the cache, the
store) can rebuild the whole answer the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from oai_server.services.common import usage_of
from oai_server.services.events import (
    ArgumentsDelta,
    Finish,
    Light,
    Opening,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from schemas.chat import (
    ChatCompletionChoice,
    ChatCompletionChunkChoice,
    ChatCompletionMessage,
    ChatCompletionMessageCustomToolCall,
    ChatCompletionMessageToolCall,
    ChatCompletionMessageToolCallChunk,
    ChatCompletionTokenLogprob,
    ChoiceLogprobs,
    CreateChatCompletionResponse,
    CreateChatCompletionStreamResponse,
    CustomCallOut,
    FinishReason,
    FunctionCallOut,
    MessageToolCall,
)
from schemas.common import CompletionUsage


@dataclass
class _Choice:
    content: str = ""
    reasoning: str | None = None
    calls: list[MessageToolCall] = field(default_factory=list)
    logprobs: list[ChatCompletionTokenLogprob] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None

    def add(self, choice: ChatCompletionChunkChoice) -> None:
        delta = choice.delta
        if delta.content:
            self.content += delta.content
        if delta.reasoning:
            self.reasoning = (self.reasoning or "") + delta.reasoning
        for call in delta.tool_calls or ():
            self._call(call)
        if choice.logprobs is not None and choice.logprobs.content:
            self.logprobs += choice.logprobs.content
        if choice.finish_reason is not None:
            self.finish_reason = choice.finish_reason
        if choice.stop_reason is not None:
            self.stop_reason = choice.stop_reason

    def _call(self, call: ChatCompletionMessageToolCallChunk) -> None:
        function, custom = call.function, call.custom
        if call.id is not None and custom is not None:
            name = custom.name or ""
            self.calls.append(
                ChatCompletionMessageCustomToolCall(
                    id=call.id, custom=CustomCallOut(name=name, input="")
                )
            )
        elif call.id is not None:
            name = function.name if function is not None and function.name else ""
            self.calls.append(
                ChatCompletionMessageToolCall(
                    id=call.id, function=FunctionCallOut(name=name, arguments="")
                )
            )
        made = self.calls[call.index]
        if isinstance(made, ChatCompletionMessageCustomToolCall):
            made.custom.input += custom.input if custom is not None and custom.input else ""
        elif function is not None and function.arguments:
            made.function.arguments += function.arguments

    def message(self) -> ChatCompletionMessage:
        if self.calls:
            # As OpenAI answers a tool call: the calls, and text only if there was any.
            message = ChatCompletionMessage(
                content=self.content or None, refusal=None, tool_calls=self.calls, annotations=[]
            )
        elif self.reasoning is not None:
            # As vLLM's parsers answer: no content at all when the thinking never ended.
            message = ChatCompletionMessage(
                content=self.content or None, refusal=None, annotations=[]
            )
        else:
            return ChatCompletionMessage(content=self.content, refusal=None, annotations=[])
        if self.reasoning is not None:
            message.reasoning = self.reasoning
        return message


class ChatAssembler:
    """Folds a chat stream's events into the `chat.completion` they add up to."""

    def __init__(self, *, with_logprobs: bool) -> None:
        self._with_logprobs = with_logprobs
        self._choices: dict[int, _Choice] = {}
        self._head: CreateChatCompletionStreamResponse | None = None
        self._usage: CompletionUsage | None = None

    def add(self, event: CreateChatCompletionStreamResponse | Light) -> None:
        if isinstance(event, TextDelta):
            self._choices[event.index].content += event.text
            return
        if isinstance(event, Opening):
            self._choices.setdefault(event.index, _Choice())
            return
        if isinstance(event, Finish):
            self._choices[event.index].finish_reason = cast(FinishReason, event.reason)
            return
        if isinstance(event, Usage):
            self._usage = usage_of(event)
            return
        if isinstance(event, ReasoningDelta):
            thinking = self._choices[event.index]
            thinking.reasoning = (thinking.reasoning or "") + event.text
            return
        if isinstance(event, ArgumentsDelta):
            made = self._choices[event.index].calls[event.call]
            assert isinstance(made, ChatCompletionMessageToolCall)  # a function's call
            made.function.arguments += event.text
            return
        if self._head is None:
            self._head = event
        for choice in event.choices:
            self._choices.setdefault(choice.index, _Choice()).add(choice)
        if event.usage is not None:
            self._usage = event.usage

    def result(self) -> CreateChatCompletionResponse:
        """The whole answer; call once every event has been added."""
        # Light events carry no `id`: the answer's comes from its first chunk (at the
        # latest its usage chunk, which a whole answer always has).
        assert self._head is not None, "the events of a whole answer include a chunk"
        out = CreateChatCompletionResponse(
            id=self._head.id,
            created=self._head.created,
            model=self._head.model,
            choices=[self._choice(i, c) for i, c in sorted(self._choices.items())],
            usage=self._usage,
        )
        if self._head.service_tier is not None:
            out.service_tier = self._head.service_tier
        return out

    def _choice(self, index: int, state: _Choice) -> ChatCompletionChoice:
        logprobs = None
        if self._with_logprobs:
            logprobs = ChoiceLogprobs(content=state.logprobs, refusal=None)
        choice = ChatCompletionChoice(
            index=index,
            message=state.message(),
            logprobs=logprobs,
            finish_reason=state.finish_reason,
        )
        if state.stop_reason is not None:
            choice.stop_reason = state.stop_reason
        return choice
