"""Anthropic's wire for the answer flow (`oai_server.http.answer`): a message's events as
server-sent events, `event: <type>` and `data: {json}`, or the whole message.

The stream has no `[DONE]`: `message_stop` ends it. A `ping` follows `message_start`
and comes again whenever no event has for `PING_INTERVAL_S` (a long prefill, a tool
call the parser holds back): proxies and clients that time an idle connection out see
it alive, as Anthropic's own stream keeps them (the stream response's `Ping`). A failure
after the 200 went out is one `error` event in Anthropic's envelope, the last of the
stream.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from oai_server.anthropic.errors import anthropic_error
from oai_server.anthropic.stream import Event, MessageRun, text_delta
from oai_server.http.answer import Prompted
from oai_server.http.answering import ChatAnswerer
from oai_server.http.sse import FramedWriter, Ping, frame
from oai_server.http.templates import cut, json_text
from oai_server.ids import new_id
from oai_server.items.stream import TextAdded, TextItem
from schemas.anthropic import Message, MessageStartEvent, PingEvent

PING_INTERVAL_S = 10.0

PING = frame(PingEvent())


def _delta_template() -> list[bytes]:
    """A text delta's frame, cut where its index and its text go: the bytes of the typed
    event by construction (a sample serialized with marker values)."""
    index, text = 987654321, "\x00oai-text\x00"
    sample = frame(text_delta(TextAdded(TextItem(index), text, ())))
    parts = cut(sample, [b"%d" % index, json_text(text)])
    assert parts is not None
    return parts


_DELTA_HEAD, _DELTA_MID, _DELTA_TAIL = _delta_template()


def frame_of(event: Event) -> bytes:
    """The bytes of one event; a text delta's spliced into its template."""
    if isinstance(event, TextAdded):
        index = b"%d" % event.item.index
        return _DELTA_HEAD + index + _DELTA_MID + json_text(event.text) + _DELTA_TAIL
    return frame(event)


class MessageWriter(FramedWriter[Event]):
    """One message's events; a ping right after `message_start`."""

    def encode(self, event: Event) -> bytes:
        if isinstance(event, MessageStartEvent):
            return frame(event) + PING
        return frame_of(event)

    def failure(self, exc: Exception) -> bytes:
        return frame(anthropic_error(exc)[1])


class Messages:
    """A message of `model`, answered by the chat service (through the response cache
    when it is on): the encoder `answer` takes for `/v1/messages`."""

    def __init__(self, model: str) -> None:
        self.model = model

    @property
    def ping(self) -> Ping:
        return Ping(PING, PING_INTERVAL_S)

    def answer_id(self, request: Request, req: Any, job: Prompted) -> str:
        """`msg_` and the x-request-id, so logs and engine traces meet on one id."""
        request_id: str | None = request.scope.get("state", {}).get("request_id")
        return new_id("msg") if request_id is None else f"msg_{request_id}"

    def _run(self, job: Prompted, answer_id: str | None) -> MessageRun:
        # `message_start` says the prompt's length before the engine's counts come.
        return MessageRun.of(answer_id or new_id("msg"), self.model, job.prompt_tokens)

    def stream(
        self, service: ChatAnswerer, job: Prompted, handle: Any, answer_id: str | None
    ) -> MessageWriter:
        return MessageWriter(self._run(job, answer_id).events(service.stream(handle)))

    async def whole(
        self, service: ChatAnswerer, job: Prompted, handle: Any, answer_id: str | None
    ) -> Message:
        return await self._run(job, answer_id).whole(service.stream(handle))
