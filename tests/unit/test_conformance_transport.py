"""The conformance transports check every response, streamed ones event by event."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.conformance import (
    AsyncValidatingTransport,
    ConformanceError,
    ConformanceLog,
    ValidatingTransport,
)
from tests.unit.spec_examples import (
    CHAT_COMPLETION,
    CHUNKS,
    COMPLETION,
    ERROR,
    MODEL,
    Handler,
    reply,
    sse,
)

# --- transports ----------------------------------------------------------------


def client(log: ConformanceLog, handler: Handler) -> httpx.Client:
    return httpx.Client(
        base_url="http://server/v1",
        transport=ValidatingTransport(log, httpx.MockTransport(handler)),
    )


class Chunks(httpx.SyncByteStream):
    """A body still to be read, delivered in small pieces as a server would."""

    def __init__(self, body: bytes, size: int = 7) -> None:
        self._pieces = [body[i : i + size] for i in range(0, len(body), size)]

    def __iter__(self) -> Iterator[bytes]:
        yield from self._pieces


def stream_reply(body: bytes, size: int = 7, **headers: str) -> Handler:
    headers = {
        "content-type": "text/event-stream",
        **{k.replace("_", "-"): v for k, v in headers.items()},
    }
    return lambda request: httpx.Response(200, headers=headers, stream=Chunks(body, size))


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**CHAT, "stream": True}


def test_transport_passes_good_json_through_intact() -> None:
    log = ConformanceLog()
    with client(log, reply(CHAT_COMPLETION)) as http:
        response = http.post("/chat/completions", json=CHAT)
    assert response.json() == CHAT_COMPLETION
    assert (log.checked, log.violations) == (1, [])


def test_transport_rejects_bad_json_and_records_it() -> None:
    log = ConformanceLog()
    bad = {**CHAT_COMPLETION, "object": "chat.completions"}
    with client(log, reply(bad)) as http, pytest.raises(ConformanceError, match=r"\$\.object"):
        http.post("/chat/completions", json=CHAT)
    assert log.checked == 1
    [violation] = log.violations
    assert violation.status == 200
    assert violation.schema == "CreateChatCompletionResponse"
    assert violation.request == "POST http://server/v1/chat/completions"
    with pytest.raises(AssertionError, match="1 OpenAI spec violation"):
        log.assert_clean()


def test_transport_rejects_error_envelope_with_integer_code() -> None:
    log = ConformanceLog()
    body = {"error": {"message": "x", "type": "t", "param": None, "code": 400}}
    with client(log, reply(body, status=400)) as http, pytest.raises(AssertionError):
        http.post("/chat/completions", json=CHAT)
    assert log.violations[0].schema == "ErrorResponse"


def test_transport_rejects_non_json_error_from_api_endpoint() -> None:
    log = ConformanceLog()
    handler = reply(content=b"Internal Server Error", status=500, content_type="text/plain")
    with client(log, handler) as http, pytest.raises(AssertionError, match="not valid JSON"):
        http.post("/chat/completions", json=CHAT)


def test_transport_rejects_nan() -> None:
    log = ConformanceLog()
    body = json.dumps(CHAT_COMPLETION).replace('"logprobs": null', '"logprobs": NaN').encode()
    handler = reply(content=body, content_type="application/json")
    with client(log, handler) as http, pytest.raises(AssertionError, match="NaN is not valid JSON"):
        http.post("/chat/completions", json=CHAT)


def test_transport_ignores_other_endpoints() -> None:
    log = ConformanceLog()
    with client(log, reply(content=b"ok", content_type="text/plain")) as http:
        assert http.get("http://server/health").text == "ok"
        assert http.post("http://server/tokenize", json={}).text == "ok"
    with client(log, reply(content=b"boom", status=500, content_type="text/plain")) as http:
        assert http.get("http://server/metrics").status_code == 500
    assert (log.checked, log.violations) == (0, [])


def test_transport_checks_json_errors_anywhere() -> None:
    log = ConformanceLog()
    with (
        client(log, reply({"detail": "Not Found"}, status=404)) as http,
        pytest.raises(AssertionError),
    ):
        http.get("http://server/nope")


def test_transport_models() -> None:
    log = ConformanceLog()
    with client(log, reply({"object": "list", "data": [MODEL]})) as http:
        http.get("/models")
    with client(log, reply(MODEL)) as http:
        http.get("/models/m")
    assert (log.checked, log.violations) == (2, [])


def test_transport_checks_stream_flag() -> None:
    log = ConformanceLog()
    with (
        client(log, reply(CHAT_COMPLETION)) as http,
        pytest.raises(AssertionError, match="stream=true"),
    ):
        http.post("/chat/completions", json=STREAM)


def test_transport_validates_sse_events() -> None:
    log = ConformanceLog()
    body = sse(*CHUNKS, "[DONE]")
    with client(log, stream_reply(body)) as http:
        response = http.post("/chat/completions", json=STREAM)
    assert response.content == body
    assert (log.checked, log.violations) == (3, [])


def test_transport_validates_already_read_sse() -> None:
    # httpx.MockTransport hands over bodies given as content= already read.
    log = ConformanceLog()
    with client(
        log, reply(content=sse(*CHUNKS, "[DONE]"), content_type="text/event-stream")
    ) as http:
        http.post("/chat/completions", json=STREAM)
    assert (log.checked, log.violations) == (3, [])
    handler = reply(content=sse(*CHUNKS), content_type="text/event-stream")
    with client(log, handler) as http, pytest.raises(AssertionError, match="without data"):
        http.post("/chat/completions", json=STREAM)


def test_transport_validates_sse_split_anywhere() -> None:
    body = sse(*CHUNKS, "[DONE]").replace(b"\n", b"\r\n")

    class OneByteAtATime(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for i in range(len(body)):
                yield body[i : i + 1]

    log = ConformanceLog()
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=OneByteAtATime()
        )
    )
    with httpx.Client(transport=ValidatingTransport(log, transport)) as http:
        assert http.post("http://server/v1/chat/completions", json=STREAM).content == body
    assert (log.checked, log.violations) == (3, [])


def test_transport_accepts_any_sse_syntax() -> None:
    """Comments, event names, CR line ends, data split over lines, one byte at a time."""
    first, second = (json.dumps(chunk, indent=1).replace("\n", "\ndata: ") for chunk in CHUNKS[:2])
    body = (
        b": keep-alive\n\n"
        + f"event: message\ndata: {first}\r\n\r\n".encode()
        + f"id: 2\rdata:{second}\r\r".encode()
        + b"data:[DONE]\r\r"
    )
    log = ConformanceLog()
    with client(log, stream_reply(body, size=1)) as http:
        http.post("/chat/completions", json=STREAM)
    assert (log.checked, log.violations) == (2, [])


def test_transport_rejects_non_utf8_stream() -> None:
    log = ConformanceLog()
    body = sse(CHUNKS[0]).replace(b"assistant", b"assistant\xff")
    with client(log, stream_reply(body)) as http, pytest.raises(AssertionError, match="UTF-8"):
        http.post("/chat/completions", json=STREAM)


def test_transport_validates_gzipped_sse() -> None:
    log = ConformanceLog()
    with client(
        log, stream_reply(gzip.compress(sse(*CHUNKS, "[DONE]")), content_encoding="gzip")
    ) as http:
        http.post("/chat/completions", json=STREAM)
    assert (log.checked, log.violations) == (3, [])


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        ((CHUNKS[0], {**CHUNKS[1], "object": "chat.completion"}, "[DONE]"), r"\$\.object"),
        ((CHUNKS[0], CHUNKS[2]), "without data: \\[DONE\\]"),
        ((CHUNKS[0], "[DONE]", "[DONE]"), "more than once"),
        ((CHUNKS[0], "[DONE]", CHUNKS[1]), "after data: \\[DONE\\]"),
        ((CHUNKS[0], "{not json", "[DONE]"), "not valid JSON"),
        ((CHUNKS[0], {"error": {"message": "x", "type": "t", "code": 500}}), "ErrorResponse"),
    ],
)
def test_transport_rejects_bad_streams(events: tuple[object, ...], reason: str) -> None:
    log = ConformanceLog()
    with (
        client(log, stream_reply(sse(*events))) as http,
        pytest.raises(ConformanceError, match=reason),
    ):
        http.post("/chat/completions", json=STREAM)
    assert len(log.violations) == 1


def test_transport_rejects_unterminated_stream() -> None:
    log = ConformanceLog()
    body = sse(*CHUNKS) + b"data: [DONE]"
    with (
        client(log, stream_reply(body)) as http,
        pytest.raises(AssertionError, match="inside an event"),
    ):
        http.post("/chat/completions", json=STREAM)


def test_stream_error_event_may_end_stream() -> None:
    log = ConformanceLog()
    with client(log, stream_reply(sse(CHUNKS[0], ERROR))) as http:
        http.post("/chat/completions", json=STREAM)
    assert (log.checked, log.violations) == (2, [])


def test_completion_stream_chunks() -> None:
    log = ConformanceLog()
    chunk = {**COMPLETION, "choices": [{**COMPLETION["choices"][0], "finish_reason": None}]}
    chunk.pop("usage")
    with client(log, stream_reply(sse(chunk, COMPLETION, "[DONE]"))) as http:
        http.post("/completions", json={"model": "m", "prompt": "x", "stream": True})
    assert (log.checked, log.violations) == (2, [])


def test_stream_is_not_buffered() -> None:
    """Each event reaches the client before the server produces the next one."""
    produced: list[int] = []

    class Slow(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for n, chunk in enumerate([*CHUNKS, "[DONE]"]):
                produced.append(n)
                yield sse(chunk)

    log = ConformanceLog()
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Slow()
        )
    )
    with (
        httpx.Client(transport=ValidatingTransport(log, transport)) as http,
        http.stream("POST", "http://server/v1/chat/completions", json=STREAM) as response,
    ):
        for n, _ in enumerate(response.iter_bytes()):
            assert produced == list(range(n + 1))
    assert (log.checked, log.violations) == (3, [])


def test_abandoned_stream_is_not_a_violation() -> None:
    log = ConformanceLog()
    with (
        client(log, stream_reply(sse(*CHUNKS))) as http,
        http.stream("POST", "/chat/completions", json=STREAM) as response,
    ):
        next(response.iter_bytes())
    assert log.violations == []


class AsyncChunks(httpx.AsyncByteStream):
    """An async body still to be read."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks


async def test_async_transport() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(
                200, json={"object": "list", "data": [{**MODEL, "created": "now"}]}
            )

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in [*CHUNKS, "[DONE]"]:
                yield sse(chunk)

        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=AsyncChunks(chunks())
        )

    log = ConformanceLog()
    transport = AsyncValidatingTransport(log, httpx.MockTransport(handler))
    async with httpx.AsyncClient(base_url="http://server/v1", transport=transport) as http:
        async with http.stream("POST", "/chat/completions", json=STREAM) as response:
            assert [line async for line in response.aiter_lines() if line] == [
                line for line in sse(*CHUNKS, "[DONE]").decode().splitlines() if line
            ]
        with pytest.raises(ConformanceError, match=r"\$\.data\[0\]\.created"):
            await http.get("/models")
    assert log.checked == 4
    assert [v.schema for v in log.violations] == ["ListModelsResponse"]


async def test_async_transport_rejects_bad_stream() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        async def chunks() -> AsyncIterator[bytes]:
            for chunk in [CHUNKS[0], {**CHUNKS[1], "created": None}, "[DONE]"]:
                yield sse(chunk)

        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=AsyncChunks(chunks())
        )

    log = ConformanceLog()
    transport = AsyncValidatingTransport(log, httpx.MockTransport(handler))
    async with (
        httpx.AsyncClient(base_url="http://server/v1", transport=transport) as http,
        http.stream("POST", "/chat/completions", json=STREAM) as response,
    ):
        lines = response.aiter_lines()
        assert (await anext(lines)).startswith("data: ")
        with pytest.raises(ConformanceError, match=r"\$\.created: None"):
            async for _ in lines:
                pass
    assert log.checked == 2
    assert len(log.violations) == 1
