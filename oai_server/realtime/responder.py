"""One Realtime response: the chat service's events as Realtime server events.

The chat stream's text becomes an assistant message item (`response.output_text.delta`
...), each tool call a `function_call` item (`response.function_call_arguments.delta`
...). The items join the conversation as they start, so a cancelled response leaves
what was said, marked incomplete.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from oai_server.error_responses import to_openai_error
from oai_server.realtime.conversation import Conversation
from oai_server.services.chat import ChatRequest, ChatService
from oai_server.services.events import TextDelta
from schemas.chat import ChatCompletionChunkChoice, CreateChatCompletionStreamResponse
from schemas.common import CompletionUsage
from schemas.realtime import (
    ArgumentsDeltaEvent,
    ArgumentsDoneEvent,
    ContentPart,
    ContentPartEvent,
    FunctionCallItem,
    InputTokenDetails,
    ItemEvent,
    MaxOutputTokens,
    MessageItem,
    OutputItemEvent,
    OutputTokenDetails,
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


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def event_id() -> str:
    return new_id("event")


@dataclass
class Responder:
    """Streams one response to the client and records it in the conversation."""

    response_id: str
    conversation: Conversation
    send: Send
    max_output_tokens: MaxOutputTokens
    metadata: dict[str, str] | None = None
    output: list[MessageItem | FunctionCallItem] = field(default_factory=list)
    usage: CompletionUsage | None = None
    _text_item: MessageItem | None = None
    _calls: dict[int, FunctionCallItem] = field(default_factory=dict)
    _finish: str | None = None

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
            out.usage = _usage(self.usage)
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
            if isinstance(event, TextDelta):
                await self._text(event.text)
            else:
                await self._chunk(event)
        await self.finish_items("completed")

    async def _chunk(self, chunk: CreateChatCompletionStreamResponse) -> None:
        if chunk.usage is not None:
            self.usage = chunk.usage
        for choice in chunk.choices:
            await self._choice(choice)

    async def _choice(self, choice: ChatCompletionChunkChoice) -> None:
        delta = choice.delta
        if delta.content:
            await self._text(delta.content)
        for call in delta.tool_calls or ():
            if call.id is not None:
                name = call.function.name if call.function and call.function.name else ""
                await self._start_call(call.index, call.id, name)
            if call.function is not None and call.function.arguments:
                await self._arguments(call.index, call.function.arguments)
        if choice.finish_reason is not None:
            self._finish = choice.finish_reason

    async def _add_item(self, item: MessageItem | FunctionCallItem) -> int:
        previous = self.conversation.add(item)
        self.output.append(item)
        index = len(self.output) - 1
        await self.send(
            OutputItemEvent(
                event_id=event_id(),
                type="response.output_item.added",
                response_id=self.response_id,
                output_index=index,
                item=item,
            )
        )
        await self.send(
            ItemEvent(
                event_id=event_id(),
                type="conversation.item.added",
                item=item,
                previous_item_id=previous,
            )
        )
        return index

    async def _text(self, text: str) -> None:
        item = self._text_item
        if item is None:
            item = MessageItem(
                id=new_id("item"),
                type="message",
                role="assistant",
                content=[],
                status="in_progress",
            )
            self._text_item = item
            index = await self._add_item(item)
            item.content.append(ContentPart(type="output_text", text=""))
            await self._part("response.content_part.added", item, index, "")
        item.content[0].text = (item.content[0].text or "") + text
        await self.send(
            TextDeltaEvent(
                event_id=event_id(),
                response_id=self.response_id,
                item_id=item.id or "",
                output_index=self.output.index(item),
                content_index=0,
                delta=text,
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

    async def _start_call(self, index: int, call_id: str, name: str) -> None:
        item = FunctionCallItem(
            id=new_id("item"),
            type="function_call",
            call_id=call_id,
            name=name,
            arguments="",
            status="in_progress",
        )
        self._calls[index] = item
        await self._add_item(item)

    async def _arguments(self, index: int, text: str) -> None:
        item = self._calls[index]
        item.arguments += text
        await self.send(
            ArgumentsDeltaEvent(
                event_id=event_id(),
                response_id=self.response_id,
                item_id=item.id or "",
                output_index=self.output.index(item),
                call_id=item.call_id or "",
                delta=text,
            )
        )

    async def finish_items(self, status: Literal["completed", "incomplete"]) -> None:
        """Close every item still open, as `status` (completed, or incomplete when cut)."""
        for index, item in enumerate(self.output):
            if item.status != "in_progress":
                continue
            item.status = status
            if isinstance(item, MessageItem):
                text = item.content[0].text or ""
                common = {"response_id": self.response_id, "item_id": item.id or ""}
                await self.send(
                    TextDoneEvent(
                        event_id=event_id(),
                        output_index=index,
                        content_index=0,
                        text=text,
                        **common,
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
            await self.send(
                ItemEvent(event_id=event_id(), type="conversation.item.done", item=item)
            )

    async def done(self, outcome: Outcome, error: BaseException | None = None) -> None:
        """Send `response.done`: completed, incomplete (length), cancelled or failed."""
        details: StatusDetails | None = None
        status: Literal["completed", "cancelled", "failed", "incomplete"] = outcome
        if outcome == "completed" and self._finish == "length":
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


def _usage(usage: CompletionUsage) -> Usage:
    cached = 0
    if usage.prompt_tokens_details is not None:
        cached = usage.prompt_tokens_details.cached_tokens
    return Usage(
        total_tokens=usage.total_tokens,
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        input_token_details=InputTokenDetails(
            cached_tokens=cached, text_tokens=usage.prompt_tokens
        ),
        output_token_details=OutputTokenDetails(text_tokens=usage.completion_tokens),
    )
