"""Server-sent events: decoding streams and checking each event as it passes."""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Final

import httpx

from tests.conformance.log import _Exchange, _loads
from tests.conformance.schemas import RESPONSE_STREAM_SCHEMA, _shorten

# --------------------------------------------------------------------------
# Server-sent events
# --------------------------------------------------------------------------

_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


class _SSEDecoder:
    """Incremental server-sent-event parser (WHATWG HTML, "event stream")."""

    def __init__(self) -> None:
        self._text = ""
        self._data: list[str] = []
        self._utf8 = codecs.getincrementaldecoder("utf-8")()

    def feed(self, chunk: bytes, *, final: bool = False) -> list[str]:
        """Consume bytes; return the ``data`` of every event completed by them.

        Raises :class:`UnicodeDecodeError` on bytes that are not UTF-8.
        """
        self._text += self._utf8.decode(chunk, final=final)
        events: list[str] = []
        while match := _LINE_BREAK.search(self._text):
            # A "\r" at the very end may be the first half of a "\r\n".
            if match.group() == "\r" and match.end() == len(self._text) and not final:
                break
            line, self._text = self._text[: match.start()], self._text[match.end() :]
            if not line:  # blank line: dispatch
                if self._data:
                    events.append("\n".join(self._data))
                self._data = []
            elif not line.startswith(":"):  # not a comment
                name, _, value = line.partition(":")
                if name == "data":
                    self._data.append(value.removeprefix(" "))
        return events

    def unterminated(self) -> str | None:
        """After the final :meth:`feed`: an event left without its blank line."""
        if self._text:
            return self._text
        if self._data:
            return "\n".join(f"data: {d}" for d in self._data)
        return None


class _StreamChecker:
    """Validates the events of one ``text/event-stream`` response."""

    def __init__(self, exchange: _Exchange, schema: str) -> None:
        self._exchange = exchange
        self._schema = schema
        self._decoder = _SSEDecoder()
        self._done = 0
        self._saw_error = False

    def feed(self, chunk: bytes, *, final: bool = False) -> None:
        try:
            events = self._decoder.feed(chunk, final=final)
        except UnicodeDecodeError as exc:
            self._exchange.fail(self._schema, f"event stream is not UTF-8: {exc}")
        for data in events:
            self._event(data)

    def _event(self, data: str) -> None:
        if data == "[DONE]" and self._schema == RESPONSE_STREAM_SCHEMA:
            self._exchange.fail(self._schema, "a Responses stream sent data: [DONE]")
        if data == "[DONE]":
            self._done += 1
            if self._done > 1:
                self._exchange.fail(self._schema, "stream sent data: [DONE] more than once")
            return
        if self._done:
            self._exchange.fail(self._schema, f"event after data: [DONE]: {_shorten(data)}")
        try:
            document = _loads(data)
        except ValueError as exc:
            self._exchange.log.record_check()
            self._exchange.fail(
                self._schema, f"event data is not valid JSON ({exc}): {_shorten(data)}"
            )
        if isinstance(document, dict) and "error" in document:
            self._saw_error = True
            self._exchange.check_document("ErrorResponse", document)
        else:
            self._exchange.check_document(self._schema, document)

    def finish(self) -> None:
        """The body ended (read to EOF, not abandoned by the client)."""
        self.feed(b"", final=True)
        leftover = self._decoder.unterminated()
        if leftover is not None:
            self._exchange.fail(
                self._schema,
                f"stream ended inside an event (no blank line after it): {_shorten(leftover)!r}",
            )
        if not self._done and not self._saw_error and self._schema != RESPONSE_STREAM_SCHEMA:
            self._exchange.fail(self._schema, "stream ended without data: [DONE]")


class _GeneratorStream(httpx.SyncByteStream):
    def __init__(self, chunks: Generator[bytes, None, None]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        return self._chunks

    def close(self) -> None:
        self._chunks.close()


class _AsyncGeneratorStream(httpx.AsyncByteStream):
    def __init__(self, chunks: AsyncGenerator[bytes, None]) -> None:
        self._chunks = chunks

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks

    async def aclose(self) -> None:
        await self._chunks.aclose()


class _ValidatingStream(httpx.SyncByteStream):
    """Passes the raw body through unchanged, validating events on the way.

    A shadow :class:`httpx.Response` decodes ``Content-Encoding`` exactly as
    the client will; each raw chunk is released as soon as its decoded bytes
    have been checked, so nothing is buffered beyond what the decoder needs.
    """

    def __init__(
        self, inner: httpx.SyncByteStream, response: httpx.Response, checker: _StreamChecker
    ) -> None:
        self._inner = inner
        self._headers = response.headers
        self._status = response.status_code
        self._checker = checker

    def __iter__(self) -> Iterator[bytes]:
        raw: list[bytes] = []

        def tee() -> Generator[bytes, None, None]:
            for chunk in self._inner:
                raw.append(chunk)
                yield chunk

        shadow = httpx.Response(self._status, headers=self._headers, stream=_GeneratorStream(tee()))
        try:
            for decoded in shadow.iter_bytes():
                self._checker.feed(decoded)
                yield from raw
                raw.clear()
        finally:
            shadow.close()  # not self._inner: the client closes that
        yield from raw
        self._checker.finish()

    def close(self) -> None:
        self._inner.close()


class _AsyncValidatingStream(httpx.AsyncByteStream):
    """Async twin of :class:`_ValidatingStream`."""

    def __init__(
        self, inner: httpx.AsyncByteStream, response: httpx.Response, checker: _StreamChecker
    ) -> None:
        self._inner = inner
        self._headers = response.headers
        self._status = response.status_code
        self._checker = checker

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raw: list[bytes] = []

        async def tee() -> AsyncGenerator[bytes, None]:
            async for chunk in self._inner:
                raw.append(chunk)
                yield chunk

        shadow = httpx.Response(
            self._status, headers=self._headers, stream=_AsyncGeneratorStream(tee())
        )
        try:
            async for decoded in shadow.aiter_bytes():
                self._checker.feed(decoded)
                for chunk in raw:
                    yield chunk
                raw.clear()
        finally:
            await shadow.aclose()  # not self._inner: the client closes that
        for chunk in raw:
            yield chunk
        self._checker.finish()

    async def aclose(self) -> None:
        await self._inner.aclose()
