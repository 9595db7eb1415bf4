"""The one place where any exception becomes an error response.

Errors come out in OpenAI's envelope, except on the paths of a feature that brought its
own (`ErrorShape`, by path prefix: Anthropic's Messages API), whose clients read that one.
The app puts its features' shapes in each request's scope (`ERROR_SHAPES`), so a refusal
from middleware, before routing, is shaped as the route's own errors are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from oai_server.errors import (
    InternalServerError,
    InvalidRequestError,
    NotFoundError,
    OpenAIError,
)
from schemas.common import ErrorObject, ErrorResponse

logger = logging.getLogger(__name__)

# nginx's status for a client that closed the connection before the answer.
CLIENT_CLOSED_REQUEST = 499


_NOT_FIELDS = frozenset({"body", "str", "int", "float", "bool", "list", "dict", "none"})


def _is_field_name(part: str) -> bool:
    """False for what pydantic adds to locations besides field names: union members
    (`str`, `list[int]`, `TextContentPart`) and discriminator tags (`user`)."""
    return part.isidentifier() and part not in _NOT_FIELDS and not part[0].isupper()


def _param(loc: tuple[int | str, ...]) -> str | None:
    """`("messages", 0, "user", "content", "str")` -> `"messages[0].content"`."""
    out = ""
    after_message = False
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            after_message = out.startswith("messages") and out.count("[") == 1
            continue
        if after_message:
            after_message = False  # the role tag pydantic's discriminated union inserts
            continue
        if _is_field_name(part):
            out = f"{out}.{part}" if out else part
    return out or None


def from_validation_errors(errors: list[Any]) -> InvalidRequestError:
    """A readable 400 from pydantic's errors: the first error names the parameter."""
    first = errors[0]
    if first["type"] in ("json_invalid", "json_type"):
        return InvalidRequestError(
            "We could not parse the JSON body of your request: the body must be a JSON object."
        )
    param = _param(tuple(first.get("loc", ())))
    if first["type"] == "missing":
        return InvalidRequestError(
            f"Missing required parameter: '{param}'.",
            param=param,
            code="missing_required_parameter",
        )
    code = "invalid_type" if first["type"].endswith(("_type", "_parsing")) else "invalid_value"
    return InvalidRequestError(
        f"Invalid value for '{param}': {first['msg']}.", param=param, code=code
    )


def to_openai_error(exc: BaseException) -> OpenAIError:
    """Any exception as the typed error a client should see."""
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, ValidationError | RequestValidationError):
        return from_validation_errors(list(exc.errors()))
    if isinstance(exc, HTTPException):
        if exc.status_code == 404:
            return NotFoundError("Not found: no such route.")
        error = OpenAIError(str(exc.detail))
        error.status_code = exc.status_code
        error.type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return error
    logger.error("unexpected error", exc_info=exc)
    return InternalServerError("The server had an error while processing your request.")


def error_body(error: OpenAIError) -> ErrorResponse:
    return ErrorResponse(
        error=ErrorObject(
            message=error.message, type=error.type, param=error.param, code=error.code
        )
    )


# Where the app keeps, in each request's scope, the error shapes its features brought.
ERROR_SHAPES = "oai.error_shapes"


@dataclass(frozen=True)
class ErrorShape:
    """A feature's own error envelope, on the paths under `prefix` (the path itself, and
    those below it after a `/`), whose clients read it rather than OpenAI's: `answer`
    gives the status and body for a typed error."""

    prefix: str
    answer: Callable[[OpenAIError], tuple[int, bytes]]

    def covers(self, path: str) -> bool:
        return path == self.prefix or path.startswith(f"{self.prefix}/")


def _shaped(error: OpenAIError, scope: Scope | None) -> tuple[int, bytes]:
    """In the envelope of the feature whose path `scope` is on, else in OpenAI's."""
    if scope is not None:
        path = scope.get("path", "")
        shapes: Sequence[ErrorShape] = scope.get(ERROR_SHAPES, ())
        for shape in shapes:
            if shape.covers(path):
                return shape.answer(error)
    return error.status_code, error_body(error).to_json()


def error_response(exc: BaseException, scope: Scope | None = None) -> Response:
    """The HTTP response for `exc` to the request of `scope`: status from its class, the
    body in the envelope its route's clients read (OpenAI's without a scope)."""
    error = to_openai_error(exc)
    # Starlette's own errors carry headers that must survive (405's Allow); ours
    # carry theirs (429's and 503's Retry-After).
    headers = exc.headers if isinstance(exc, HTTPException) else error.headers
    status, body = _shaped(error, scope)
    return Response(body, status, headers, media_type="application/json")


async def refuse(exc: BaseException, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer `exc` from ASGI middleware: the HTTP response, or for a WebSocket handshake
    the same response where the server can send one (ASGI's denial-response extension),
    else a close before accepting (the client sees 403)."""
    if scope["type"] == "http":
        await error_response(exc, scope)(scope, receive, send)
        return
    await receive()  # websocket.connect
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    error = to_openai_error(exc)
    headers = [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    await send(
        {
            "type": "websocket.http.response.start",
            "status": error.status_code,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "websocket.http.response.body", "body": error_body(error).to_json()})


def exception_response(exc: Exception, scope: Scope | None = None) -> Response:
    """The response to whatever the handler of the request of `scope` raised."""
    if isinstance(exc, ClientDisconnect):
        # Nobody is left to read an answer: not an error of the server, nothing to log.
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    return error_response(exc, scope)


async def _handle(request: Request, exc: Exception) -> Response:
    return exception_response(exc, request.scope)


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception a handler can raise through `exception_response`."""
    for exc_type in (
        OpenAIError,
        ValidationError,
        RequestValidationError,
        HTTPException,
        ClientDisconnect,
        Exception,
    ):
        app.add_exception_handler(exc_type, _handle)
