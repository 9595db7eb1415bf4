"""One response's events: the chat service's events as Responses stream events.

The chat stream's text becomes an assistant message item (`response.output_text.delta`
...), each tool call a `function_call` item (`response.function_call_arguments.delta`
...), in OpenAI's order: an item is added, its content grows, it is done, and only
then does the next item start. The last event carries the whole response, which is
exactly what a non-streamed call returns: that is the fold of these same events.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from oai_server.error_responses import to_openai_error
from oai_server.responses.items import new_id
from oai_server.responses.logprobs import event_logprobs, part_logprobs
from oai_server.services.chat import ChatRequest, ChatService
from oai_server.services.events import TextDelta
from schemas.chat import ChatCompletionChunkChoice
from schemas.response_events import (
    ArgumentsDeltaEvent,
    ArgumentsDoneEvent,
    ContentPartEvent,
    OutputItemEvent,
    OutputTextDeltaEvent,
    OutputTextDoneEvent,
    ResponseLifecycleEvent,
    ResponseStreamEvent,
)
from schemas.responses import (
    FunctionCallItem,
    IncompleteDetails,
    InputTokensDetails,
    LogProb,
    MessageItem,
    OutputTextContent,
    Response,
    ResponseError,
    ResponseUsage,
)

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
    error: Exception | None = None
    _sequence: int = 0
    _text: MessageItem | None = None
    _call: FunctionCallItem | None = None
    _finish: str | None = None
    # Logprobs of tokens whose text has not come out yet (held back by the tool-call parser).
    _logprobs: list[LogProb] = field(default_factory=list)
    _pending: list[RunEvent] = field(default_factory=list)

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
                if isinstance(event, TextDelta):
                    self._add_text(event.text)
                else:
                    for choice in event.choices:
                        self._choice(choice)
                for out in self._pending:
                    yield out
                self._pending.clear()
        except Exception as exc:  # noqa: BLE001 - a failure becomes `response.failed`
            logger.warning("response %s failed: %r", self.response.id, exc)
            self.error = exc
            for out in self._close("incomplete"):
                yield out
            error = to_openai_error(exc)
            self.response.status = "failed"
            self.response.error = ResponseError(code="server_error", message=error.message)
            self._finish_usage(chat)
            yield self.lifecycle("response.failed")
            return
        incomplete = self._finish == "length"
        for out in self._close("incomplete" if incomplete else "completed"):
            yield out
        self._finish_usage(chat)
        if incomplete:
            self.response.status = "incomplete"
            self.response.incomplete_details = IncompleteDetails(reason="max_output_tokens")
            yield self.lifecycle("response.incomplete")
        else:
            self.response.status = "completed"
            self.response.completed_at = int(time.time())
            yield self.lifecycle("response.completed")

    def _finish_usage(self, chat: ChatRequest) -> None:
        usage = chat.generation.usage
        self.response.usage = ResponseUsage(
            input_tokens=usage.prompt_tokens,
            input_tokens_details=InputTokensDetails(cached_tokens=usage.cached_tokens),
            output_tokens=usage.completion_tokens,
            total_tokens=usage.prompt_tokens + usage.completion_tokens,
        )

    def _choice(self, choice: ChatCompletionChunkChoice) -> None:
        delta = choice.delta
        if choice.logprobs is not None and choice.logprobs.content:
            self._logprobs += part_logprobs(choice.logprobs.content)
        if delta.content:
            self._add_text(delta.content)
        for call in delta.tool_calls or ():
            if call.id is not None:
                name = call.function.name if call.function and call.function.name else ""
                self._start_call(call.id, name)
            if call.function is not None and call.function.arguments:
                self._add_arguments(call.function.arguments)
        if choice.finish_reason is not None:
            self._finish = choice.finish_reason

    def _add_item(self, item: MessageItem | FunctionCallItem) -> int:
        self.response.output.append(item)
        index = len(self.response.output) - 1
        self._pending.append(
            OutputItemEvent(
                type="response.output_item.added",
                output_index=index,
                sequence_number=self._next(),
                item=item,
            )
        )
        return index

    def _add_text(self, text: str) -> None:
        item = self._text
        if item is None:
            self._pending.extend(self._close("completed"))
            item = self._text = MessageItem(
                id=new_id("msg"), role="assistant", status="in_progress", content=[]
            )
            index = self._add_item(item)
            item.content.append(OutputTextContent(text=""))
            self._pending.append(self._part_event("response.content_part.added", item, index))
        part = item.content[0]
        assert isinstance(part, OutputTextContent)
        part.text += text
        index = len(self.response.output) - 1
        if not self._logprobs:
            self._pending.append(TextDeltaOut(item.id, index, text, self._next()))
            return
        logprobs, self._logprobs = self._logprobs, []
        part.logprobs += logprobs
        self._pending.append(
            OutputTextDeltaEvent(
                item_id=item.id,
                output_index=index,
                content_index=0,
                delta=text,
                sequence_number=self._next(),
                logprobs=event_logprobs(logprobs),
            )
        )

    def _part_event(self, kind: str, item: MessageItem, index: int) -> ContentPartEvent:
        part = item.content[0]
        assert isinstance(part, OutputTextContent)
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

    def _start_call(self, call_id: str, name: str) -> None:
        self._pending.extend(self._close("completed"))
        self._logprobs = []  # the call's own tokens: no text part to carry them
        self._call = FunctionCallItem(
            id=new_id("fc"), call_id=call_id, name=name, arguments="", status="in_progress"
        )
        self._add_item(self._call)

    def _add_arguments(self, arguments: str) -> None:
        call = self._call
        if call is None:
            return
        call.arguments += arguments
        self._pending.append(
            ArgumentsDeltaEvent(
                item_id=call.id,
                output_index=len(self.response.output) - 1,
                delta=arguments,
                sequence_number=self._next(),
            )
        )

    def _close(self, status: str) -> list[ResponseStreamEvent]:
        """The events that finish the open item, if any."""
        out: list[ResponseStreamEvent] = []
        item: MessageItem | FunctionCallItem
        index = len(self.response.output) - 1
        if self._text is not None:
            item, self._text = self._text, None
            part = item.content[0]
            assert isinstance(part, OutputTextContent)
            # The last tokens' (such as the end of text's) when no text followed them.
            part.logprobs += self._logprobs
            self._logprobs = []
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
            item.status = "completed" if status == "completed" else "incomplete"
        elif self._call is not None:
            call, self._call = self._call, None
            out.append(
                ArgumentsDoneEvent(
                    item_id=call.id,
                    name=call.name,
                    output_index=index,
                    arguments=call.arguments,
                    sequence_number=self._next(),
                )
            )
            call.status = "completed" if status == "completed" else "incomplete"
            item = call
        else:
            return out
        out.append(
            OutputItemEvent(
                type="response.output_item.done",
                output_index=index,
                sequence_number=self._next(),
                item=item,
            )
        )
        return out
