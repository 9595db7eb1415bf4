"""The stream's ASGI messages: events ready together go out together, one write each."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence

from starlette.types import Message

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.errors import EngineDeadError
from oai_server.http.sse import DONE, ChunkWriter, EventStreamResponse
from oai_server.http.templates import LightEvents, event, json_text
from oai_server.services.chat import ChatService
from oai_server.services.common import StreamSettings
from oai_server.services.events import EventStream, Finish, Light, Opening, TextDelta, Usage
from oai_server.settings import Settings
from schemas.common import ResponseModel
from tests.unit.conftest import chat_body, chat_scope, staying_client

CHUNKS = ChatService(FakeEngine(), "m").chunks(("chatcmpl-1", 17), "m", StreamSettings(True, False))


class Given:
    """A service whose answer's handle is its stream."""

    def stream(self, handle: EventStream[ResponseModel]) -> EventStream[ResponseModel]:
        return handle


def sse(item: Light) -> bytes:
    """What `item` is on the wire."""
    if isinstance(item, TextDelta):
        around = LightEvents(CHUNKS).text_around(item.index)
        assert around is not None
        return around[0] + json_text(item.text) + around[1]
    return LightEvents(CHUNKS).encode(item)


async def bodies(
    items: Sequence[ResponseModel | Light], failure: Exception | None = None
) -> list[bytes]:
    """The body of each message the response sends for `items` (then `failure`, if any)."""

    async def events() -> AsyncIterator[ResponseModel | Light]:
        for item in items:
            await asyncio.sleep(0)  # as an engine's steps come: each after a wait
            yield item
        if failure is not None:
            raise failure

    async def receive() -> Message:
        await asyncio.Event().wait()  # the client stays
        raise AssertionError("unreachable")

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    stream = EventStream(events(), CHUNKS)
    response = EventStreamResponse(ChunkWriter(Given(), None, stream, None))
    await response({"type": "http"}, receive, send)
    assert sent[0]["type"] == "http.response.start"
    assert [m["more_body"] for m in sent[1:]] == [True] * (len(sent) - 2) + [False]
    return [m["body"] for m in sent[1:]]


async def test_an_opening_goes_out_with_the_first_text_and_the_end_in_one_message() -> None:
    items: list[Light] = [
        Opening(0),
        TextDelta(0, "Hel"),
        TextDelta(0, "lo"),
        Finish(0, "stop"),
        Usage(5, 2, 0),
    ]
    got = await bodies(items)
    assert got == [
        sse(items[0]) + sse(items[1]),
        sse(items[2]),
        sse(items[3]) + sse(items[4]) + DONE,
    ]


async def test_a_choice_that_finishes_first_does_not_wait_for_the_others() -> None:
    items: list[Light] = [
        Opening(0),
        Opening(1),
        TextDelta(0, "a"),
        Finish(0, "stop"),
        TextDelta(1, "b"),
        Finish(1, "length"),
        Usage(5, 2, 0),
    ]
    got = await bodies(items)
    assert got == [
        sse(items[0]) + sse(items[1]) + sse(items[2]),
        sse(items[3]),
        sse(items[4]),
        sse(items[5]) + sse(items[6]) + DONE,
    ]


async def test_a_failure_after_the_last_finish_still_reaches_the_client_before_done() -> None:
    items: list[Light] = [Opening(0), TextDelta(0, "a"), Finish(0, "stop")]
    got = await bodies(items, EngineDeadError("the engine died"))
    assert got[:1] == [sse(items[0]) + sse(items[1])]
    assert got[1].startswith(sse(items[2]) + b'data: {"error":')
    assert got[1].endswith(DONE)
    assert b"the engine died" in got[1]


async def test_typed_chunks_are_sent_one_by_one() -> None:
    # As with logprobs or continuous usage: each chunk differs, and goes out as it comes.
    typed = [CHUNKS.of(Opening(0)), CHUNKS.of(TextDelta(0, "a")), CHUNKS.of(Finish(0, "stop"))]
    assert await bodies(typed) == [event(chunk) for chunk in typed] + [DONE]


async def app_bodies(engine: FakeEngine) -> list[bytes]:
    """The body of each message our app sends for a streamed chat answer from `engine`."""
    body = json.dumps(
        chat_body(stream=True, stream_options={"include_usage": True}, max_tokens=8)
    ).encode()
    scope, receive = chat_scope(), staying_client(body)

    sent: list[bytes] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            sent.append(message["body"])

    app = create_app(Settings(), engine)
    async with app.router.lifespan_context(app):
        await engine.start()
        await app(scope, receive, send)
    return sent


def roles(body: bytes) -> int:
    return body.count(b'"role":"assistant"')


async def test_the_role_goes_out_with_the_first_text_and_the_finish_with_the_usage() -> None:
    got = await app_bodies(FakeEngine(tokens=["Hi", " there"]))
    assert len(got) == 3
    assert roles(got[0]) == 1
    assert b'"content":"Hi"' in got[0]
    assert b'"content":" there"' in got[1]
    assert b'"finish_reason":"stop"' in got[2]
    assert b'"total_tokens"' in got[2]
    assert got[2].endswith(DONE)


async def test_the_role_goes_out_at_once_when_the_first_step_has_no_text() -> None:
    # Nothing to send with it (a token that decodes to nothing yet): it does not wait.
    got = await app_bodies(FakeEngine(tokens=["", "Hi"]))
    assert roles(got[0]) == 1
    assert got[0].count(b"data: ") == 1
    assert b'"content":"Hi"' in got[1]
    assert b"".join(got).count(b"data: ") == 5  # role, text, finish, usage, [DONE]
