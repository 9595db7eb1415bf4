"""One response's events: the answer's item events as Responses stream events.

The text item becomes an assistant message (`response.output_text.delta` ...), each call
item a `function_call` item (`response.function_call_arguments.delta` ...) or a
`custom_tool_call` item (`response.custom_tool_call_input.delta` ...), the thinking
(with a reasoning parser) a `reasoning` item (`response.reasoning_text.delta` ...), in OpenAI's
order: an item is added, its content grows, it is done, and only then does the next
item start. The last event carries the whole response, which is
exactly what a non-streamed call returns: that is the fold of these same events.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from oai_server.error_responses import to_openai_error
from oai_server.ids import new_id
from oai_server.items.stream import (
    ArgumentsAdded,
    CallItem,
    ItemAdded,
    ItemDone,
    ItemStream,
    ItemUpdate,
    OutputItem,
    TextAdded,
    TextItem,
    ThoughtAdded,
    ThoughtItem,
)
from oai_server.responses.logprobs import event_logprobs, part_logprobs
from oai_server.responses.tools import OfferedTools
from oai_server.services.chat import ChatRequest, ChatService
from oai_server.services.common import response_usage
from schemas.response_events import (
    ArgumentsDeltaEvent,
    ArgumentsDoneEvent,
    ContentPartEvent,
    CustomToolCallInputDeltaEvent,
    CustomToolCallInputDoneEvent,
    OutputItemEvent,
    OutputTextDeltaEvent,
    OutputTextDoneEvent,
    ReasoningTextDeltaEvent,
    ReasoningTextDoneEvent,
    ResponseLifecycleEvent,
    ResponseStreamEvent,
)
from schemas.response_items import (
    CustomToolCallItem,
    FunctionCallItem,
    MessageItem,
    OutputTextContent,
    ReasoningItem,
    ReasoningTextContent,
)
from schemas.responses import IncompleteDetails, Response, ResponseError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TextDeltaOut:
    """`response.output_text.delta`, the commonest event, without building a model per token."""

    item_id: str
    output_index: int
    delta: str
    sequence_number: int
    type: str = "response.output_text.delta"

    def event(self) -> OutputTextDeltaEvent:
        return OutputTextDeltaEvent(
            item_id=self.item_id,
            output_index=self.output_index,
            content_index=0,
            delta=self.delta,
            sequence_number=self.sequence_number,
        )


RunEvent = ResponseStreamEvent | TextDeltaOut


@dataclass
class ResponseRun:
    """Streams one response; `response` is the response as it stands, whole at the end.

    An event shows the response and its items as they are when it is yielded, and is
    meant to be encoded before the next one is asked for (nothing is copied per event).
    """

    response: Response
    # The tools offered: how a call's name is answered (a namespace's tools).
    tools: OfferedTools = field(default_factory=OfferedTools)
    # Each finished reasoning item's `encrypted_content`, when the request asked for it.
    seal: Callable[[ReasoningItem], str] | None = None
    error: Exception | None = None
    _sequence: int = 0
    _items: ItemStream = field(default_factory=lambda: ItemStream(one_open=True, reasoning=True))
    # Each message's id and text part, by output index: found once per token.
    _parts: dict[int, tuple[str, OutputTextContent]] = field(default_factory=dict)

    def _next(self) -> int:
        self._sequence += 1
        return self._sequence - 1

    def lifecycle(self, kind: str) -> ResponseLifecycleEvent:
        return ResponseLifecycleEvent.model_validate(
            {
                "type": kind,
                "sequence_number": self._next(),
                "response": self.response,
            }
        )

    async def events(self, service: ChatService, chat: ChatRequest) -> AsyncIterator[RunEvent]:
        """Every event of the response, from `response.created` to its last one."""
        yield self.lifecycle("response.created")
        self.response.status = "in_progress"
        yield self.lifecycle("response.in_progress")
        try:
            async for event in service.stream(chat):
                for out in self._encode(self._items.feed(event)):
                    yield out
        except Exception as exc:  # noqa: BLE001 - a failure becomes `response.failed`
            logger.warning("response %s failed: %r", self.response.id, exc)
            self.error = exc
            for out in self._encode(self._items.close("incomplete")):
                yield out
            error = to_openai_error(exc)
            self.response.status = "failed"
            self.response.error = ResponseError(code="server_error", message=error.message)
            self.response.usage = response_usage(chat.generation.usage)
            yield self.lifecycle("response.failed")
            return
        incomplete = self._items.finish_reason == "length"
        for out in self._encode(self._items.close("incomplete" if incomplete else "completed")):
            yield out
        self.response.usage = response_usage(chat.generation.usage)
        if incomplete:
            self.response.status = "incomplete"
            self.response.incomplete_details = IncompleteDetails(reason="max_output_tokens")
            yield self.lifecycle("response.incomplete")
        else:
            self.response.status = "completed"
            self.response.completed_at = int(time.time())
            yield self.lifecycle("response.completed")

    def _encode(self, batch: list[ItemUpdate]) -> list[RunEvent]:
        """One chat event's item events as Responses events, all built before any is sent."""
        out: list[RunEvent] = []
        for event in batch:
            if isinstance(event, TextAdded):
                out.append(self._text_delta(event))
            elif isinstance(event, ThoughtAdded):
                out.append(self._thought_delta(event))
            elif isinstance(event, ArgumentsAdded):
                out.append(self._arguments_delta(event))
            elif isinstance(event, ItemAdded):
                self._added(event.item, out)
            else:
                self._done(event, out)
        return out

    def _arguments_delta(
        self, event: ArgumentsAdded
    ) -> ArgumentsDeltaEvent | CustomToolCallInputDeltaEvent:
        call = self.response.output[event.item.index]
        if isinstance(call, CustomToolCallItem):
            call.input += event.text
            return CustomToolCallInputDeltaEvent(
                item_id=call.id,
                output_index=event.item.index,
                delta=event.text,
                sequence_number=self._next(),
            )
        assert isinstance(call, FunctionCallItem)
        call.arguments += event.text
        return ArgumentsDeltaEvent(
            item_id=call.id,
            output_index=event.item.index,
            delta=event.text,
            sequence_number=self._next(),
        )

    def _call(self, added: CallItem) -> FunctionCallItem | CustomToolCallItem:
        """The item of a call, named as its tool was given (`namespace` and `name`)."""
        namespace, name = self.tools.call_name(added.name)
        item: FunctionCallItem | CustomToolCallItem
        if added.custom:
            item = CustomToolCallItem(
                id=new_id("ctc"), call_id=added.call_id, name=name, input="", status="in_progress"
            )
        else:
            item = FunctionCallItem(
                id=new_id("fc"),
                call_id=added.call_id,
                name=name,
                arguments="",
                status="in_progress",
            )
        if namespace is not None:
            item.namespace = namespace
        return item

    def _added(self, added: OutputItem, out: list[RunEvent]) -> None:
        item: MessageItem | FunctionCallItem | CustomToolCallItem | ReasoningItem
        if isinstance(added, TextItem):
            item = MessageItem(id=new_id("msg"), role="assistant", status="in_progress", content=[])
        elif isinstance(added, ThoughtItem):
            item = ReasoningItem(id=new_id("rs"), status="in_progress")
        else:
            item = self._call(added)
        self.response.output.append(item)
        out.append(
            OutputItemEvent(
                type="response.output_item.added",
                output_index=added.index,
                sequence_number=self._next(),
                item=item,
            )
        )
        if isinstance(item, MessageItem):
            part = OutputTextContent(text="")
            item.content.append(part)
            self._parts[added.index] = (item.id, part)
            out.append(self._part_event("response.content_part.added", item, added.index))
        elif isinstance(item, ReasoningItem):
            # As vLLM streams it: the reasoning text is the item's content part 0.
            item.content.append(ReasoningTextContent(text=""))
            out.append(self._part_event("response.content_part.added", item, added.index))

    def _thought_delta(self, event: ThoughtAdded) -> ReasoningTextDeltaEvent:
        item = self.response.output[event.item.index]
        assert isinstance(item, ReasoningItem)
        item.content[0].text += event.text
        return ReasoningTextDeltaEvent(
            item_id=item.id,
            output_index=event.item.index,
            content_index=0,
            delta=event.text,
            sequence_number=self._next(),
        )

    def _text_delta(self, event: TextAdded) -> RunEvent:
        item_id, part = self._parts[event.item.index]
        part.text += event.text
        if not event.logprobs:
            return TextDeltaOut(item_id, event.item.index, event.text, self._next())
        logprobs = part_logprobs(event.logprobs)
        part.logprobs += logprobs
        return OutputTextDeltaEvent(
            item_id=item_id,
            output_index=event.item.index,
            content_index=0,
            delta=event.text,
            sequence_number=self._next(),
            logprobs=event_logprobs(logprobs),
        )

    @staticmethod
    def _part(item: object) -> OutputTextContent:
        assert isinstance(item, MessageItem)
        part = item.content[0]
        assert isinstance(part, OutputTextContent)
        return part

    def _part_event(
        self, kind: str, item: MessageItem | ReasoningItem, index: int
    ) -> ContentPartEvent:
        part = item.content[0] if isinstance(item, ReasoningItem) else self._part(item)
        return ContentPartEvent.model_validate(
            {
                "type": kind,
                "item_id": item.id,
                "output_index": index,
                "content_index": 0,
                "part": part,
                "sequence_number": self._next(),
            }
        )

    def _done(self, event: ItemDone, out: list[RunEvent]) -> None:
        """The events that finish an item."""
        index = event.item.index
        item = self.response.output[index]
        if isinstance(item, MessageItem):
            part = self._part(item)
            # The last tokens' (such as the end of text's) when no text followed them.
            part.logprobs += part_logprobs(event.logprobs)
            out.append(
                OutputTextDoneEvent(
                    item_id=item.id,
                    output_index=index,
                    content_index=0,
                    text=part.text,
                    sequence_number=self._next(),
                    logprobs=event_logprobs(part.logprobs),
                )
            )
            out.append(self._part_event("response.content_part.done", item, index))
        elif isinstance(item, ReasoningItem):
            out.append(
                ReasoningTextDoneEvent(
                    item_id=item.id,
                    output_index=index,
                    content_index=0,
                    text=item.content[0].text,
                    sequence_number=self._next(),
                )
            )
            out.append(self._part_event("response.content_part.done", item, index))
            if self.seal is not None:
                item.encrypted_content = self.seal(item)
        elif isinstance(item, CustomToolCallItem):
            out.append(
                CustomToolCallInputDoneEvent(
                    item_id=item.id,
                    output_index=index,
                    input=item.input,
                    sequence_number=self._next(),
                )
            )
        else:
            assert isinstance(item, FunctionCallItem)
            out.append(
                ArgumentsDoneEvent(
                    item_id=item.id,
                    name=item.name,
                    output_index=index,
                    arguments=item.arguments,
                    sequence_number=self._next(),
                )
            )
        item.status = event.item.status
        out.append(
            OutputItemEvent(
                type="response.output_item.done",
                output_index=index,
                sequence_number=self._next(),
                item=item,
            )
        )
