"""One Realtime response: the answer's item events as Realtime server events.

The text item becomes an assistant message item (`response.output_text.delta` ...),
each call item a `function_call` item (`response.function_call_arguments.delta` ...).
The items join the conversation as they start, so a cancelled response leaves what
was said, marked incomplete. An out-of-band response (`conversation: "none"`) joins no
conversation: its items come only as `response.output_item.*` events, never as
`conversation.item.*` ones, which announce the default conversation's items.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from oai_server.error_responses import to_openai_error
from oai_server.ids import new_id
from oai_server.items.stream import (
    ArgumentsAdded,
    CallItem,
    ItemAdded,
    ItemStream,
    ItemUpdate,
    OutputItem,
    TextAdded,
    TextItem,
)
from oai_server.realtime.conversation import Conversation
from oai_server.services.chat import ChatRequest, ChatService
from oai_server.services.common import realtime_usage
from schemas.realtime import (
    ArgumentsDeltaEvent,
    ArgumentsDoneEvent,
    ContentPart,
    ContentPartEvent,
    FunctionCallItem,
    ItemEvent,
    MaxOutputTokens,
    MessageItem,
    OutputItemEvent,
    Response,
    ResponseEvent,
    ServerEvent,
    StatusDetails,
    StatusError,
    TextDeltaEvent,
    TextDoneEvent,
    TextPart,
    Usage,
)

Send = Callable[[ServerEvent], Awaitable[None]]
Outcome = Literal["completed", "cancelled", "failed"]
PartEvent = Literal["response.content_part.added", "response.content_part.done"]


def event_id() -> str:
    return new_id("event")


@dataclass
class Responder:
    """Streams one response to the client and records it in the conversation."""

    response_id: str
    # The conversation the output joins; None for an out-of-band response.
    conversation: Conversation | None
    send: Send
    max_output_tokens: MaxOutputTokens
    metadata: dict[str, str] | None = None
    output: list[MessageItem | FunctionCallItem] = field(default_factory=list)
    usage: Usage | None = None
    _items: ItemStream = field(default_factory=lambda: ItemStream(one_open=False))

    def response(
        self,
        status: Literal["completed", "cancelled", "failed", "incomplete", "in_progress"],
        details: StatusDetails | None = None,
    ) -> Response:
        out = Response(
            id=self.response_id,
            status=status,
            output=self.output,
            output_modalities=["text"],
            max_output_tokens=self.max_output_tokens,
        )
        if details is not None:
            out.status_details = details
        if self.metadata is not None:
            out.metadata = self.metadata
        if self.usage is not None:
            out.usage = self.usage
        return out

    async def created(self) -> None:
        await self.send(
            ResponseEvent(
                event_id=event_id(), type="response.created", response=self.response("in_progress")
            )
        )

    async def run(self, service: ChatService, chat: ChatRequest) -> None:
        """Stream the answer; return when it is whole (cancellation propagates)."""
        async for event in service.stream(chat):
            for update in self._items.feed(event):
                await self._encode(update)
        self.usage = realtime_usage(chat.generation.usage)
        await self.finish_items("completed")

    async def finish_items(self, status: Literal["completed", "incomplete"]) -> None:
        """Close every item still open, as `status` (completed, or incomplete when cut)."""
        for event in self._items.close(status):
            await self._encode(event)

    async def _encode(self, event: ItemUpdate) -> None:
        if isinstance(event, TextAdded):
            await self._text(event)
        elif isinstance(event, ArgumentsAdded):
            await self._arguments(event)
        elif isinstance(event, ItemAdded):
            await self._added(event.item)
        else:
            await self._done(event.item)

    async def _added(self, added: OutputItem) -> None:
        item: MessageItem | FunctionCallItem
        if isinstance(added, TextItem):
            item = MessageItem(
                id=new_id("item"),
                type="message",
                role="assistant",
                content=[],
                status="in_progress",
            )
        else:
            # No thought items: this item stream leaves the thinking out (`reasoning` off).
            assert isinstance(added, CallItem)
            item = FunctionCallItem(
                id=new_id("item"),
                type="function_call",
                call_id=added.call_id,
                name=added.name,
                arguments="",
                status="in_progress",
            )
        self.output.append(item)
        await self.send(
            OutputItemEvent(
                event_id=event_id(),
                type="response.output_item.added",
                response_id=self.response_id,
                output_index=added.index,
                item=item,
            )
        )
        if self.conversation is not None:
            previous = self.conversation.add(item)
            await self.send(
                ItemEvent(
                    event_id=event_id(),
                    type="conversation.item.added",
                    item=item,
                    previous_item_id=previous,
                )
            )
        if isinstance(item, MessageItem):
            item.content.append(ContentPart(type="output_text", text=""))
            await self._part("response.content_part.added", item, added.index, "")

    async def _text(self, event: TextAdded) -> None:
        item = self.output[event.item.index]
        assert isinstance(item, MessageItem)
        item.content[0].text = (item.content[0].text or "") + event.text
        await self.send(
            TextDeltaEvent(
                event_id=event_id(),
                response_id=self.response_id,
                item_id=item.id or "",
                output_index=event.item.index,
                content_index=0,
                delta=event.text,
            )
        )

    async def _part(self, kind: PartEvent, item: MessageItem, index: int, text: str) -> None:
        await self.send(
            ContentPartEvent(
                event_id=event_id(),
                type=kind,
                response_id=self.response_id,
                item_id=item.id or "",
                output_index=index,
                content_index=0,
                part=TextPart(text=text),
            )
        )

    async def _arguments(self, event: ArgumentsAdded) -> None:
        item = self.output[event.item.index]
        assert isinstance(item, FunctionCallItem)
        item.arguments = event.item.arguments
        await self.send(
            ArgumentsDeltaEvent(
                event_id=event_id(),
                response_id=self.response_id,
                item_id=item.id or "",
                output_index=event.item.index,
                call_id=item.call_id or "",
                delta=event.text,
            )
        )

    async def _done(self, done: OutputItem) -> None:
        index = done.index
        item = self.output[index]
        item.status = done.status
        if isinstance(item, MessageItem):
            text = item.content[0].text or ""
            await self.send(
                TextDoneEvent(
                    event_id=event_id(),
                    response_id=self.response_id,
                    item_id=item.id or "",
                    output_index=index,
                    content_index=0,
                    text=text,
                )
            )
            await self._part("response.content_part.done", item, index, text)
        else:
            await self.send(
                ArgumentsDoneEvent(
                    event_id=event_id(),
                    response_id=self.response_id,
                    item_id=item.id or "",
                    output_index=index,
                    call_id=item.call_id or "",
                    name=item.name,
                    arguments=item.arguments,
                )
            )
        await self.send(
            OutputItemEvent(
                event_id=event_id(),
                type="response.output_item.done",
                response_id=self.response_id,
                output_index=index,
                item=item,
            )
        )
        if self.conversation is not None:
            await self.send(
                ItemEvent(event_id=event_id(), type="conversation.item.done", item=item)
            )

    async def done(self, outcome: Outcome, error: BaseException | None = None) -> None:
        """Send `response.done`: completed, incomplete (length), cancelled or failed."""
        details: StatusDetails | None = None
        status: Literal["completed", "cancelled", "failed", "incomplete"] = outcome
        if outcome == "completed" and self._items.finish_reason == "length":
            status = "incomplete"
            details = StatusDetails(type="incomplete", reason="max_output_tokens")
        elif outcome == "cancelled":
            details = StatusDetails(type="cancelled", reason="client_cancelled")
        elif outcome == "failed" and error is not None:
            failure = to_openai_error(error)
            details = StatusDetails(
                type="failed", error=StatusError(type=failure.type, code=failure.code)
            )
        await self.send(
            ResponseEvent(
                event_id=event_id(), type="response.done", response=self.response(status, details)
            )
        )
