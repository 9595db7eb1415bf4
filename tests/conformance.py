"""Check server responses against OpenAI's official OpenAPI specification.

The reference is the vendored ``tests/spec/openapi.yaml`` (see
``tests/spec/README.md``).  Its ``#/components/schemas`` are loaded once per
process (cached as JSON between runs), rewritten into plain JSON Schema 2020-12
(see :func:`to_json_schema`) and validated with :mod:`jsonschema`.

Entry points:

* :func:`validate` -- assert that one document conforms to a named schema.
* :func:`schema_for` -- which schema a response of a given endpoint must meet.
* :class:`ValidatingTransport` / :class:`AsyncValidatingTransport` -- httpx
  transports that check every response passing through them, including each
  server-sent event of a stream as it arrives, and record every violation in a
  :class:`ConformanceLog`, so a session-level fixture can fail the run even if a
  client library swallowed the :class:`ConformanceError` raised at the time::

      log = ConformanceLog()
      client = openai.OpenAI(
          base_url="http://127.0.0.1:8000/v1",
          api_key="sk-test",
          http_client=httpx.Client(transport=ValidatingTransport(log)),
      )
      ...
      log.assert_clean()

Spec quirks handled here (beyond OpenAPI's own keywords):

* OpenAPI 3.0-style ``nullable: true`` inside a 3.1 document, including next
  to ``enum`` and ``$ref``; JSON Schema ignores it, so it is rewritten.
* ``Model`` (and a few other schemas) list ``properties`` without
  ``type: object``, so JSON Schema would accept a bare string as a model;
  such schemas are made objects.
* The streamed chunks of ``POST /v1/completions`` are documented as
  ``CreateCompletionResponse``, whose ``finish_reason`` and ``usage`` may not
  be null, yet every chunk but the last carries ``"finish_reason": null`` (the
  spec's own streaming example does), and with ``stream_options.include_usage``
  "all other chunks will also include a ``usage`` field, but with a null
  value" (``ChatCompletionStreamOptions``, which ``CreateCompletionRequest``
  uses too).  Streams are checked against the synthetic
  :data:`COMPLETION_STREAM_SCHEMA`, identical but for those two fields.
"""

from __future__ import annotations

import codecs
import copy
import functools
import hashlib
import json
import os
import re
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn

import httpx
import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = [
    "COMPLETION_STREAM_SCHEMA",
    "SPEC_PATH",
    "AsyncValidatingTransport",
    "ConformanceError",
    "ConformanceLog",
    "ValidatingTransport",
    "Violation",
    "async_validating_client",
    "check",
    "default_log",
    "load_schemas",
    "schema_for",
    "to_json_schema",
    "validate",
    "validating_client",
]

SPEC_PATH: Final = Path(__file__).resolve().parent / "spec" / "openapi.yaml"
"""The vendored OpenAI OpenAPI document."""

COMPLETION_STREAM_SCHEMA: Final = "CreateCompletionStreamResponse"
"""Synthetic schema (not in the spec) for the SSE chunks of ``/v1/completions``."""

# Base URI under which the rewritten components are registered; never fetched.
_SPEC_URI: Final = "urn:openai-openapi"

# Keywords whose value is a schema, a list of schemas, or a map of schemas.
_SCHEMA_KEYWORDS: Final = frozenset(
    {
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
_SCHEMA_LIST_KEYWORDS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAP_KEYWORDS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
# OpenAPI-only keywords, dropped (``x-*`` extensions are dropped too).
_OPENAPI_KEYWORDS: Final = frozenset(
    {"nullable", "discriminator", "example", "xml", "externalDocs"}
)
_COMBINATORS: Final = frozenset({"allOf", "anyOf", "oneOf", "not", "$ref"})
# Keywords that constrain nothing: a schema of only these accepts anything.
_ANNOTATION_KEYWORDS: Final = frozenset(
    {
        "title",
        "description",
        "default",
        "deprecated",
        "examples",
        "readOnly",
        "writeOnly",
        "$comment",
    }
)

_MAX_SHOWN: Final = 300  # characters of a document quoted in a message


class ConformanceError(AssertionError):
    """A response does not conform to the OpenAI specification."""


# --------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------


def to_json_schema(node: Any) -> Any:
    """Rewrite one OpenAPI schema object into equivalent JSON Schema 2020-12.

    ``nullable: true`` becomes ``{"anyOf": [<schema>, {"type": "null"}]}``,
    which also covers ``enum`` lists (null need not be listed) and ``$ref``
    siblings; OpenAPI-only keywords and ``x-*`` extensions are dropped; a
    schema with ``properties`` but no ``type`` (nor combinator) gets
    ``type: object``, as OpenAI's SDKs read it, so that it rejects non-objects.
    Property *names* are never mistaken for keywords: only keyword positions
    that hold schemas are descended into.
    """
    if not isinstance(node, dict):
        return node  # boolean schema
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _OPENAPI_KEYWORDS or key.startswith("x-"):
            continue
        if key in _SCHEMA_KEYWORDS:
            out[key] = to_json_schema(value)
        elif key in _SCHEMA_LIST_KEYWORDS:
            out[key] = [to_json_schema(item) for item in value]
        elif key in _SCHEMA_MAP_KEYWORDS:
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        else:
            out[key] = value
    if "properties" in out and "type" not in out and not _COMBINATORS & set(out):
        out["type"] = "object"  # e.g. Model: an object in every OpenAI SDK, untyped here
    if node.get("nullable") is True and not set(out) <= _ANNOTATION_KEYWORDS:
        annotations = {key: out.pop(key) for key in list(out) if key in _ANNOTATION_KEYWORDS}
        return {**annotations, "anyOf": [out, {"type": "null"}]}
    return out


def _completion_stream_schema(response_schema: dict[str, Any]) -> dict[str, Any]:
    """Derive :data:`COMPLETION_STREAM_SCHEMA`: ``finish_reason`` and ``usage`` may be null."""
    schema = copy.deepcopy(response_schema)
    properties = schema["properties"]
    choice = properties["choices"]["items"]["properties"]
    choice["finish_reason"] = {"anyOf": [choice["finish_reason"], {"type": "null"}]}
    properties["usage"] = {"anyOf": [properties["usage"], {"type": "null"}]}
    schema["description"] = (
        "Not in the spec: CreateCompletionResponse with a nullable choices[].finish_reason "
        "(null in every streamed chunk but the last) and a nullable usage (null in every "
        "chunk but the usage chunk when stream_options.include_usage is set)."
    )
    return schema


def _parse_spec() -> dict[str, Any]:
    """Parse the YAML spec and rewrite its schemas (about a second with libyaml)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with SPEC_PATH.open("rb") as fh:
        spec = yaml.load(fh, Loader=loader)
    schemas = {
        name: to_json_schema(schema) for name, schema in spec["components"]["schemas"].items()
    }
    _allow_unscored_echo_token(schemas["CreateCompletionResponse"])
    schemas.setdefault(
        COMPLETION_STREAM_SCHEMA, _completion_stream_schema(schemas["CreateCompletionResponse"])
    )
    return schemas


def _allow_unscored_echo_token(response_schema: dict[str, Any]) -> None:
    """Erratum: with `echo` and `logprobs`, the prompt's first token has no logprob.

    Nothing precedes it, so OpenAI's API (and vLLM's) send `null` at index 0 of
    `token_logprobs` and `top_logprobs`, which the spec types as plain numbers and
    objects. Evaluation harnesses index these arrays by position, so the null must
    stay; only those two item types are widened.
    """
    choice = response_schema["properties"]["choices"]["items"]["properties"]
    logprobs = choice["logprobs"]["anyOf"][0]["properties"]
    for name in ("token_logprobs", "top_logprobs"):
        items = logprobs[name]["items"]
        logprobs[name]["items"] = {"anyOf": [items, {"type": "null"}]}


def _cache_file() -> Path:
    """Where the rewritten schemas are kept between runs, keyed by content.

    The key hashes both the spec and this module, so editing either one
    invalidates the cache; the directory is the user's own cache directory.
    """
    digest = hashlib.sha256(SPEC_PATH.read_bytes() + Path(__file__).read_bytes()).hexdigest()
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "oai-server-tests" / f"openapi-schemas-{digest[:32]}.json"


@functools.cache
def load_schemas() -> dict[str, Any]:
    """Return every ``#/components/schemas`` entry, rewritten to JSON Schema.

    Once per process: from a JSON cache written by an earlier run (a few
    tens of milliseconds), else by parsing the 3 MB YAML spec (about a second)
    and writing that cache.  A cache that cannot be read or written is skipped.
    """
    cache = _cache_file()
    try:
        cached: dict[str, Any] = json.loads(cache.read_bytes())
    except (OSError, ValueError):
        pass
    else:
        return cached
    schemas = _parse_spec()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(schemas), encoding="utf-8")
        os.replace(partial, cache)  # atomic: concurrent runs never see half a file
    except (OSError, TypeError, ValueError):
        pass
    return schemas


@functools.cache
def _registry() -> Registry[Any]:
    document = {"components": {"schemas": load_schemas()}}
    resource: Resource[Any] = Resource.from_contents(document, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(_SPEC_URI, resource)
    return registry


@functools.cache
def _validator(schema_name: str) -> Draft202012Validator:
    if schema_name not in load_schemas():
        raise KeyError(f"no schema {schema_name!r} in #/components/schemas of {SPEC_PATH.name}")
    return Draft202012Validator(
        {"$ref": f"{_SPEC_URI}#/components/schemas/{schema_name}"}, registry=_registry()
    )


def _json_path(path: Iterable[str | int]) -> str:
    """Render a jsonschema error path as ``$.choices[0].message``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _shorten(text: str, limit: int = _MAX_SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(error: ValidationError, depth: int = 0) -> list[str]:
    """One line per error, then the failing branches of ``anyOf``/``oneOf``.

    The ``{"type": "null"}`` branches added for ``nullable`` are left out as
    noise: they only say that the value is not null.
    """
    lines = [f"{_json_path(error.absolute_path)}: {_shorten(error.message)}"]
    if not error.context or depth >= 2:
        return lines
    branches = [
        e for e in error.context if not (e.validator == "type" and e.validator_value == "null")
    ]
    for sub in sorted(
        branches or error.context, key=lambda e: (str(e.relative_schema_path), e.message)
    )[:8]:
        branch = (
            f"{error.validator}[{sub.relative_schema_path[0]}]" if sub.relative_schema_path else "?"
        )
        first, *rest = _describe(sub, depth + 1)
        lines.append(f"{'    ' * depth}  - {branch}: {first}")
        lines.extend(rest)
    return lines


def check(schema_name: str, instance: object) -> list[str]:
    """Return readable reasons why ``instance`` does not conform (empty if it does).

    ``schema_name`` names an entry of ``#/components/schemas`` (or
    :data:`COMPLETION_STREAM_SCHEMA`); each reason is ``<json path>: <why>``.
    """
    errors = sorted(
        _validator(schema_name).iter_errors(instance), key=lambda e: _json_path(e.absolute_path)
    )
    return [line for error in errors for line in _describe(error)]


def validate(schema_name: str, instance: object) -> None:
    """Assert that ``instance`` conforms to ``#/components/schemas/<schema_name>``.

    Raises :class:`ConformanceError` (an :class:`AssertionError`) listing each
    violation as ``<json path>: <reason>``.
    """
    problem = _nonconformance(schema_name, instance)
    if problem is not None:
        raise ConformanceError(problem)


def _nonconformance(schema_name: str, instance: object) -> str | None:
    """The message :func:`validate` raises, or ``None`` if ``instance`` conforms."""
    reasons = check(schema_name, instance)
    if not reasons:
        return None
    shown = _shorten(json.dumps(instance, default=repr), 1000)
    return (
        f"does not conform to #/components/schemas/{schema_name}:\n  "
        + "\n  ".join(reasons)
        + f"\n  document: {shown}"
    )


# --------------------------------------------------------------------------
# Endpoint -> schema
# --------------------------------------------------------------------------

_PREFIX: Final = r"(?:/.*)?/v1"
_ROUTES: Final[tuple[tuple[str, re.Pattern[str], str, str], ...]] = (
    # method, path, schema of a JSON body, schema of each SSE event
    (
        "POST",
        re.compile(_PREFIX + r"/chat/completions/?"),
        "CreateChatCompletionResponse",
        "CreateChatCompletionStreamResponse",
    ),
    (
        "POST",
        re.compile(_PREFIX + r"/completions/?"),
        "CreateCompletionResponse",
        COMPLETION_STREAM_SCHEMA,
    ),
    ("GET", re.compile(_PREFIX + r"/models/?"), "ListModelsResponse", "ListModelsResponse"),
    ("GET", re.compile(_PREFIX + r"/models/[^/].*"), "Model", "Model"),
)


def _route(method: str, path: str) -> tuple[str, str] | None:
    if "://" in path:
        path = httpx.URL(path).path
    path = path.split("?", 1)[0]
    for route_method, pattern, body_schema, event_schema in _ROUTES:
        if method.upper() == route_method and pattern.fullmatch(path):
            return body_schema, event_schema
    return None


def schema_for(method: str, path: str, status: int, streamed: bool) -> str | None:
    """Name the schema a response must conform to, or ``None`` if unchecked.

    ``path`` is the request path (a prefix before ``/v1`` and a query string
    are allowed; a full URL works too).  Any ``status >= 400`` maps to
    ``ErrorResponse``.  ``streamed`` selects the schema of each server-sent
    event rather than of a whole JSON body.  Endpoints outside the OpenAI API
    (``/health``, ``/metrics``, ``/tokenize``...) give ``None``.
    """
    if status >= 400:
        return "ErrorResponse"
    route = _route(method, path)
    if route is None:
        return None
    return route[1] if streamed else route[0]


# --------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    """One nonconforming response (or stream event)."""

    request: str  # e.g. "POST http://127.0.0.1:8000/v1/chat/completions"
    status: int
    schema: str | None
    message: str

    def __str__(self) -> str:
        against = f" [{self.schema}]" if self.schema else ""
        return f"{self.request} -> {self.status}{against}: {self.message}"


@dataclass
class ConformanceLog:
    """Every check made and every violation found, shared by transports.

    Thread-safe.  ``checked`` counts JSON documents validated (each SSE event
    counts once).
    """

    checked: int = 0
    violations: list[Violation] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_check(self) -> None:
        """Count one validated document."""
        with self._lock:
            self.checked += 1

    def record_violation(self, violation: Violation) -> None:
        """Remember a violation."""
        with self._lock:
            self.violations.append(violation)

    def report(self) -> str:
        """A human-readable summary of all violations."""
        with self._lock:
            found = list(self.violations)
            checked = self.checked
        if not found:
            return f"{checked} documents checked against the OpenAI spec, all conform"
        body = "\n".join(f"{n}. {v}" for n, v in enumerate(found, 1))
        return f"{len(found)} OpenAI spec violation(s) in {checked} documents checked:\n{body}"

    def assert_clean(self) -> None:
        """Raise :class:`ConformanceError` if any violation was recorded."""
        if self.violations:
            raise ConformanceError(self.report())

    def clear(self) -> None:
        """Forget everything recorded so far."""
        with self._lock:
            self.checked = 0
            self.violations.clear()


default_log: Final = ConformanceLog()
"""The log transports use when none is given."""


@dataclass(frozen=True)
class _Exchange:
    """Where a document came from, for messages."""

    log: ConformanceLog
    request: str
    status: int

    def fail(self, schema: str | None, message: str) -> NoReturn:
        violation = Violation(self.request, self.status, schema, message)
        self.log.record_violation(violation)
        raise ConformanceError(str(violation))

    def check_document(self, schema: str, document: object) -> None:
        self.log.record_check()
        problem = _nonconformance(schema, document)
        if problem is not None:
            self.fail(schema, problem)

    def check_json(self, schema: str, body: bytes) -> None:
        try:
            document = _loads(body)
        except ValueError as exc:
            self.log.record_check()
            self.fail(schema, f"body is not valid JSON ({exc}): {_shorten(repr(body))}")
        else:
            self.check_document(schema, document)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _loads(data: bytes | str) -> object:
    """Strict JSON: unlike :func:`json.loads`, rejects NaN and +/-Infinity."""
    return json.loads(data, parse_constant=_reject_constant)


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
        if not self._done and not self._saw_error:
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
    """An :class:`httpx.Client` whose responses are all checked (``kwargs`` go to it)."""
    return httpx.Client(transport=ValidatingTransport(log, transport), **kwargs)


def async_validating_client(
    log: ConformanceLog | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    **kwargs: Any,
) -> httpx.AsyncClient:
    """An :class:`httpx.AsyncClient` whose responses are all checked."""
    return httpx.AsyncClient(transport=AsyncValidatingTransport(log, transport), **kwargs)
