"""The chat service's events as item events: what an answer says, item by item.

The chat stream's text becomes an assistant text item, each tool call a call item; an
item is added, grows (`TextAdded`, `ArgumentsAdded`) and is done. The events name no
API's wire format: the Realtime session and the Responses stream each encode them.

Two orders exist, as the two APIs send them today: `one_open` (Responses) closes an item
before the next starts, and text after a call starts a new item; otherwise (Realtime)
every item stays open until the answer ends, and all text goes to one item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

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
    ChatCompletionChunkChoice,
    ChatCompletionTokenLogprob,
    CreateChatCompletionStreamResponse,
)

_NONE: Sequence[ChatCompletionTokenLogprob] = ()

Status = Literal["in_progress", "completed", "incomplete"]


@dataclass(slots=True)
class TextItem:
    """The assistant's text; `index` is its place in the answer's items.

    Its text is the sum of its `TextAdded` events: each encoder keeps it in its own part,
    so a token's text is joined once, not once here and again there.
    """

    index: int
    status: Status = "in_progress"


@dataclass(slots=True)
class CallItem:
    """One function call the assistant makes."""

    index: int
    call_id: str
    name: str
    # `arguments`: a function's JSON arguments, or a custom tool's input text.
    arguments: str = ""
    status: Status = "in_progress"
    custom: bool = False


@dataclass(slots=True)
class ThoughtItem:
    """The model's thinking (`delta.reasoning`), told apart from its answer."""

    index: int
    status: Status = "in_progress"


OutputItem = TextItem | CallItem | ThoughtItem


# Events are plain slotted classes, not frozen ones: a frozen dataclass pays for
# `object.__setattr__` per field, and one `TextAdded` is built per token.


@dataclass(slots=True)
class ItemAdded:
    item: OutputItem


@dataclass(slots=True)
class TextAdded:
    """More text; `logprobs` are its tokens' (those held back before it included)."""

    item: TextItem
    text: str
    logprobs: Sequence[ChatCompletionTokenLogprob]


@dataclass(slots=True)
class ThoughtAdded:
    """More thinking."""

    item: ThoughtItem
    text: str


@dataclass(slots=True)
class ArgumentsAdded:
    item: CallItem
    text: str


@dataclass(slots=True)
class ItemDone:
    """The item is whole; `logprobs` are the last tokens' that no text followed."""

    item: OutputItem
    logprobs: Sequence[ChatCompletionTokenLogprob]


ItemUpdate = ItemAdded | TextAdded | ThoughtAdded | ArgumentsAdded | ItemDone


@dataclass
class ItemStream:
    """Folds one answer's chat events into item events; `items` are the answer's so far."""

    one_open: bool
    # Whether the thinking becomes thought items; otherwise it is left out (Realtime's
    # answer is its text, not the thinking).
    reasoning: bool = False
    items: list[OutputItem] = field(default_factory=list)
    finish_reason: str | None = None
    _text: TextItem | None = None
    _thought: ThoughtItem | None = None
    _calls: dict[int, CallItem] = field(default_factory=dict)
    # Logprobs of tokens whose text has not come out yet (held back by the tool-call parser).
    _logprobs: list[ChatCompletionTokenLogprob] = field(default_factory=list)

    def feed(self, event: CreateChatCompletionStreamResponse | Light) -> list[ItemUpdate]:
        """The item events of one chat event, in order (often one, or none).

        A plain call, not an async generator over the chat stream: the encoders iterate
        the stream themselves, so a token costs no extra generator hop.
        """
        out: list[ItemUpdate] = []
        if isinstance(event, TextDelta):
            item = self._text
            if item is not None and item.status == "in_progress" and not self._logprobs:
                return [TextAdded(item, event.text, _NONE)]  # the commonest event, made short
            self._add_text(event.text, out)
            return out
        if isinstance(event, Finish):
            self.finish_reason = event.reason
            return out
        if isinstance(event, Opening | Usage):
            return out  # the role, and no content yet; or the counts, read from the engine's
        if isinstance(event, ReasoningDelta):
            if self.reasoning:
                self._add_thought(event.text, out)
            return out
        if isinstance(event, ArgumentsDelta):
            self._add_arguments(event.call, event.text, out)
            return out
        for choice in event.choices:
            self._choice(choice, out)
        return out

    def close(self, status: Literal["completed", "incomplete"]) -> list[ItemUpdate]:
        """Finish every item still open, as `status`."""
        out: list[ItemUpdate] = []
        for item in self.items:
            if item.status == "in_progress":
                self._done(item, status, out)
        return out

    def _choice(self, choice: ChatCompletionChunkChoice, out: list[ItemUpdate]) -> None:
        delta = choice.delta
        if choice.logprobs is not None and choice.logprobs.content:
            self._logprobs += choice.logprobs.content
        if delta.reasoning and self.reasoning:
            self._add_thought(delta.reasoning, out)
        if delta.content:
            self._add_text(delta.content, out)
        for call in delta.tool_calls or ():
            function, custom = call.function, call.custom
            if call.id is not None and custom is not None:
                self._start_call(call.index, call.id, custom.name or "", out, custom=True)
            elif call.id is not None:
                name = function.name if function and function.name else ""
                self._start_call(call.index, call.id, name, out)
            if function is not None and function.arguments:
                self._add_arguments(call.index, function.arguments, out)
            elif custom is not None and custom.input:
                self._add_arguments(call.index, custom.input, out)
        if choice.finish_reason is not None:
            self.finish_reason = choice.finish_reason

    def _add_text(self, text: str, out: list[ItemUpdate]) -> None:
        item = self._text
        if item is None or item.status != "in_progress":
            if self.one_open:
                out += self.close("completed")
            item = self._text = TextItem(len(self.items))
            self.items.append(item)
            out.append(ItemAdded(item))
        out.append(TextAdded(item, text, self._take_logprobs()))

    def _add_thought(self, text: str, out: list[ItemUpdate]) -> None:
        item = self._thought
        if item is None or item.status != "in_progress":
            if self.one_open:
                out += self.close("completed")
            item = self._thought = ThoughtItem(len(self.items))
            self.items.append(item)
            out.append(ItemAdded(item))
        out.append(ThoughtAdded(item, text))

    def _start_call(
        self, index: int, call_id: str, name: str, out: list[ItemUpdate], custom: bool = False
    ) -> None:
        if self.one_open:
            out += self.close("completed")
        self._logprobs = []  # the call's own tokens: no text part to carry them
        item = self._calls[index] = CallItem(len(self.items), call_id, name, custom=custom)
        self.items.append(item)
        out.append(ItemAdded(item))

    def _add_arguments(self, index: int, text: str, out: list[ItemUpdate]) -> None:
        item = self._calls.get(index)
        if item is None or item.status != "in_progress":
            return
        item.arguments += text
        out.append(ArgumentsAdded(item, text))

    def _done(self, item: OutputItem, status: Status, out: list[ItemUpdate]) -> None:
        logprobs = self._take_logprobs() if isinstance(item, TextItem) else _NONE
        item.status = status
        out.append(ItemDone(item, logprobs))

    def _take_logprobs(self) -> Sequence[ChatCompletionTokenLogprob]:
        if not self._logprobs:
            return _NONE
        logprobs, self._logprobs = self._logprobs, []
        return logprobs
