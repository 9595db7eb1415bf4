"""One message's events: the answer's item events as Anthropic's stream events.

The text item becomes a `text` content block, each call item a `tool_use` block whose
input streams as `input_json_delta`, the thinking (with a reasoning parser) a `thinking`
block (`thinking_delta`, then its `signature_delta` just before it stops); a block
starts, grows and stops before the next starts (`ItemStream(one_open=True)`, as
Responses orders its items). `message_start`
comes first, `message_delta` (the stop reason, the counts) and `message_stop` last.
`message` is the message as it stands: whole once the events are over, which is what
a call without `stream` returns, so both answers are one fold of the same events.

A text block's next text, most of a stream, goes out as the item stream's own
`TextAdded`, not as a `content_block_delta` model: the encoder splices it into the
event's bytes (`sse.py`), as chat splices its chunks, and the block's text is joined
once, when it stops.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from oai_server.generation.engine_request import Usage as Counts
from oai_server.items.stream import (
    ArgumentsAdded,
    CallItem,
    ItemAdded,
    ItemDone,
    ItemStream,
    ItemUpdate,
    TextAdded,
    ThoughtAdded,
    ThoughtItem,
)
from oai_server.services.events import EventStream
from schemas.anthropic import (
    ContentBlockDeltaEvent,
    ContentBlockStartEvent,
    ContentBlockStopEvent,
    InputJSONDelta,
    Message,
    MessageDelta,
    MessageDeltaEvent,
    MessageDeltaUsage,
    MessageStartEvent,
    MessageStopEvent,
    SignatureDelta,
    StopReason,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
    Usage,
)
from schemas.chat import CreateChatCompletionStreamResponse
from schemas.common import ResponseModel

# What `events` yields: Anthropic's events, and a text block's next text as the item
# stream's `TextAdded` (its `content_block_delta`, spliced into bytes by the encoder).
Event = StreamEvent | TextAdded


def text_delta(event: TextAdded) -> ContentBlockDeltaEvent:
    """The `content_block_delta` a `TextAdded` stands for."""
    return ContentBlockDeltaEvent(index=event.item.index, delta=TextDelta(text=event.text))


def parsed_input(arguments: str) -> dict[str, Any]:
    """A call's arguments as `tool_use.input`: an object, `{}` for none or malformed."""
    try:
        value = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class MessageRun:
    """Streams one message; `message` is whole once `events` has ended."""

    message: Message
    _items: ItemStream = field(default_factory=lambda: ItemStream(one_open=True, reasoning=True))
    _counts: Counts | None = None
    _stop_string: str | None = None
    _arguments: dict[int, str] = field(default_factory=dict)
    # Each open text block's pieces, joined into its text when it stops.
    _texts: dict[int, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, message_id: str, model: str, input_tokens: int) -> MessageRun:
        usage = Usage(
            input_tokens=input_tokens,
            output_tokens=0,
            cache_creation_input_tokens=0,
            cache_read_input_tokens=0,
        )
        message = Message(
            id=message_id,
            content=[],
            model=model,
            stop_reason=None,
            stop_sequence=None,
            usage=usage,
        )
        return cls(message)

    async def events(self, stream: EventStream[ResponseModel]) -> AsyncGenerator[Event, None]:
        """Every event of the message, from `message_start` to `message_stop`; a text
        block's delta as its `TextAdded` (the `content_block_delta` it stands for)."""
        yield MessageStartEvent(message=self.message)
        async for event in stream:
            if isinstance(event, Counts):
                self._counts = event
                continue
            if isinstance(event, CreateChatCompletionStreamResponse):
                self._read(event)
            elif isinstance(event, ResponseModel):
                continue  # a chat stream has no other kind of chunk
            for out in self._encode(self._items.feed(event)):
                yield out
        for out in self._encode(self._items.close("completed")):
            yield out
        self._finish()
        usage = self.message.usage
        yield MessageDeltaEvent(
            delta=MessageDelta(
                stop_reason=self.message.stop_reason, stop_sequence=self.message.stop_sequence
            ),
            usage=MessageDeltaUsage(
                output_tokens=usage.output_tokens,
                input_tokens=usage.input_tokens,
                cache_creation_input_tokens=0,
                cache_read_input_tokens=usage.cache_read_input_tokens,
            ),
        )
        yield MessageStopEvent()

    async def whole(self, stream: EventStream[ResponseModel]) -> Message:
        """The whole message: the fold of its events."""
        async for _ in self.events(stream):
            pass
        return self.message

    def _read(self, chunk: CreateChatCompletionStreamResponse) -> None:
        """What a full chunk says beyond the items: the stop string met, the counts."""
        for choice in chunk.choices:
            if isinstance(choice.stop_reason, str):
                self._stop_string = choice.stop_reason
        if chunk.usage is not None:  # a replayed answer's counts
            details = chunk.usage.prompt_tokens_details
            cached = details.cached_tokens if details is not None else 0
            self._counts = Counts(chunk.usage.prompt_tokens, chunk.usage.completion_tokens, cached)

    def _finish(self) -> None:
        message = self.message
        reason = self._items.finish_reason
        called = any(isinstance(block, ToolUseBlock) for block in message.content)
        stop: StopReason = "end_turn"
        if reason == "length":
            stop = "max_tokens"
        elif self._stop_string is not None and not called:
            stop, message.stop_sequence = "stop_sequence", self._stop_string
        elif called or reason == "tool_calls":
            stop = "tool_use"
        message.stop_reason = stop
        counts = self._counts
        if counts is not None:
            # Anthropic's `input_tokens` are those the prefix cache did not hold.
            message.usage.input_tokens = counts.prompt_tokens - counts.cached_tokens
            message.usage.cache_read_input_tokens = counts.cached_tokens
            message.usage.output_tokens = counts.completion_tokens

    def _encode(self, batch: list[ItemUpdate]) -> list[Event]:
        out: list[Event] = []
        content = self.message.content
        for event in batch:
            index = event.item.index
            if type(event) is TextAdded:
                self._texts[index].append(event.text)
                out.append(event)
            elif isinstance(event, ThoughtAdded):
                self._texts[index].append(event.text)
                out.append(
                    ContentBlockDeltaEvent(index=index, delta=ThinkingDelta(thinking=event.text))
                )
            elif isinstance(event, ArgumentsAdded):
                self._arguments[index] += event.text
                delta = InputJSONDelta(partial_json=event.text)
                out.append(ContentBlockDeltaEvent(index=index, delta=delta))
            elif isinstance(event, ItemAdded):
                item = event.item
                started: TextBlock | ToolUseBlock | ThinkingBlock
                if isinstance(item, CallItem):
                    started = ToolUseBlock(id=item.call_id, name=item.name, input={})
                    self._arguments[index] = ""
                elif isinstance(item, ThoughtItem):
                    started = ThinkingBlock(thinking="", signature="")
                    self._texts[index] = []
                else:
                    started = TextBlock(text="")
                    self._texts[index] = []
                content.append(started)
                # A copy: the block in `message` grows, the event shows its start.
                out.append(ContentBlockStartEvent(index=index, content_block=started.model_copy()))
            else:
                assert isinstance(event, ItemDone)
                block = content[index]
                if isinstance(block, ToolUseBlock):
                    block.input = parsed_input(self._arguments[index])
                elif isinstance(block, TextBlock):
                    block.text = "".join(self._texts.pop(index))
                else:
                    block.thinking = "".join(self._texts.pop(index))
                    # As vLLM signs it: an opaque token (nothing here checks it when the
                    # block comes back; the SDKs need one to send the block back).
                    block.signature = uuid.uuid4().hex
                    signed = SignatureDelta(signature=block.signature)
                    out.append(ContentBlockDeltaEvent(index=index, delta=signed))
                out.append(ContentBlockStopEvent(index=index))
        return out
