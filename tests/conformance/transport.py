"""httpx transports that check every response passing through them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tests.conformance.log import ConformanceLog, _Exchange, _loads, default_log
from tests.conformance.routes import _route, schema_for
from tests.conformance.schemas import ConformanceError, _registry
from tests.conformance.sse import _AsyncValidatingStream, _StreamChecker, _ValidatingStream

# --------------------------------------------------------------------------
# Transports
# --------------------------------------------------------------------------


def _media_type(response: httpx.Response) -> str:
    content_type: str = response.headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower()


def _is_json(response: httpx.Response) -> bool:
    media = _media_type(response)
    return media == "application/json" or media.endswith("+json")


def _stream_requested(request: httpx.Request) -> bool | None:
    """The ``stream`` flag of a JSON request body, if it can be read."""
    try:
        body = _loads(request.content)
    except (httpx.RequestNotRead, ValueError):
        return None
    return bool(body.get("stream")) if isinstance(body, dict) else None


@dataclass(frozen=True)
class _Plan:
    """What to do with one response."""

    exchange: _Exchange
    schema: str | None  # None: pass through unchecked
    streamed: bool


def _plan(log: ConformanceLog, request: httpx.Request, response: httpx.Response) -> _Plan:
    exchange = _Exchange(log, f"{request.method} {request.url}", response.status_code)
    method, path, status = request.method, request.url.path, response.status_code
    if method == "HEAD" or status < 200 or status in (204, 304):
        return _Plan(exchange, None, streamed=False)
    if status >= 400:
        # Endpoints of the OpenAI API must answer with its error envelope;
        # elsewhere (/health, unknown paths) only JSON error bodies are checked.
        if _route(method, path) is None and not _is_json(response):
            return _Plan(exchange, None, streamed=False)
        return _Plan(exchange, schema_for(method, path, status, streamed=False), streamed=False)
    streamed = _media_type(response) == "text/event-stream"
    schema = schema_for(method, path, status, streamed)
    if schema is not None and method == "POST":
        requested = _stream_requested(request)
        if requested is not None and requested != streamed:
            exchange.fail(
                schema,
                f"request had stream={str(requested).lower()} but the response is "
                f"{_media_type(response) or 'untyped'}",
            )
    return _Plan(exchange, schema, streamed)


def _check_read(plan: _Plan, response: httpx.Response) -> None:
    """Check a body that was read before it reached us (``httpx.MockTransport`` does)."""
    assert plan.schema is not None
    if plan.streamed:
        checker = _StreamChecker(plan.exchange, plan.schema)
        checker.feed(response.content)
        checker.finish()
    else:
        plan.exchange.check_json(plan.schema, response.content)


def _json_body(raw: bytes, response: httpx.Response) -> bytes:
    """Decode ``Content-Encoding`` the way the client will."""
    return httpx.Response(response.status_code, headers=response.headers, content=raw).content


class ValidatingTransport(httpx.BaseTransport):
    """An httpx transport that checks each response against the OpenAI spec.

    JSON bodies are read, validated and handed on intact; ``text/event-stream``
    bodies are validated event by event as the client reads them.  Every
    violation is recorded in ``log`` (default: :data:`default_log`) and raised
    as :class:`ConformanceError`.  ``transport`` is the one that really sends
    requests (default: a new :class:`httpx.HTTPTransport`).  The spec is parsed
    on construction (once per process), so it never delays a response.
    """

    def __init__(
        self, log: ConformanceLog | None = None, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.log = default_log if log is None else log
        self._inner = httpx.HTTPTransport() if transport is None else transport
        _registry()  # parse the spec now, not while timing a first response

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.SyncByteStream)
        try:
            plan = _plan(self.log, request, response)
        except ConformanceError:
            stream.close()
            raise
        if plan.schema is None:
            return response
        if response.is_stream_consumed:
            _check_read(plan, response)
            return response
        if plan.streamed:
            response.stream = _ValidatingStream(
                stream, response, _StreamChecker(plan.exchange, plan.schema)
            )
            return response
        try:
            raw = b"".join(stream)
        finally:
            stream.close()
        response.stream = httpx.ByteStream(raw)
        plan.exchange.check_json(plan.schema, _json_body(raw, response))
        return response

    def close(self) -> None:
        self._inner.close()


class AsyncValidatingTransport(httpx.AsyncBaseTransport):
    """Async twin of :class:`ValidatingTransport`."""

    def __init__(
        self, log: ConformanceLog | None = None, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.log = default_log if log is None else log
        self._inner = httpx.AsyncHTTPTransport() if transport is None else transport
        _registry()  # parse the spec now, not while timing a first response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        try:
            plan = _plan(self.log, request, response)
        except ConformanceError:
            await stream.aclose()
            raise
        if plan.schema is None:
            return response
        if response.is_stream_consumed:
            _check_read(plan, response)
            return response
        if plan.streamed:
            response.stream = _AsyncValidatingStream(
                stream, response, _StreamChecker(plan.exchange, plan.schema)
            )
            return response
        try:
            raw = b"".join([chunk async for chunk in stream])
        finally:
            await stream.aclose()
        response.stream = httpx.ByteStream(raw)
        plan.exchange.check_json(plan.schema, _json_body(raw, response))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def validating_client(
    log: ConformanceLog | None = None, transport: httpx.BaseTransport | None = None, **kwargs: Any
) -> httpx.Client:
    """An :class:`httpx.Client` whose responses are all checked (``kwargs`` go to it;
    `verify` to the transport it makes: a client given a transport ignores its own)."""
    if transport is None and "verify" in kwargs:
        transport = httpx.HTTPTransport(verify=kwargs.pop("verify"))
    return httpx.Client(transport=ValidatingTransport(log, transport), **kwargs)


def async_validating_client(
    log: ConformanceLog | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    **kwargs: Any,
) -> httpx.AsyncClient:
    """An :class:`httpx.AsyncClient` whose responses are all checked (`verify` as above)."""
    if transport is None and "verify" in kwargs:
        transport = httpx.AsyncHTTPTransport(verify=kwargs.pop("verify"))
    return httpx.AsyncClient(transport=AsyncValidatingTransport(log, transport), **kwargs)


def checked_request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request, as `httpx.request` makes it, its response checked against the spec
    (`timeout` and `verify` go to the client, as httpx's top-level functions take them)."""
    options = {name: kwargs.pop(name) for name in ("timeout", "verify") if name in kwargs}
    with validating_client(**options) as client:
        return client.request(method, url, **kwargs)


def checked_get(url: str, **kwargs: Any) -> httpx.Response:
    """`httpx.get`, its response checked."""
    return checked_request("GET", url, **kwargs)


def checked_post(url: str, **kwargs: Any) -> httpx.Response:
    """`httpx.post`, its response checked."""
    return checked_request("POST", url, **kwargs)
