"""The one place where any exception becomes an error response.

Errors come out in OpenAI's envelope, except on the routes of Anthropic's Messages API
(`ANTHROPIC_ROUTES`, matched on the request's path, refusals before routing included),
whose clients read Anthropic's: `{"type": "error", "error": {"type", "message"}}` with
Anthropic's types, and 529 for load shedding.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from oai_server.errors import (
    ContextLengthExceededError,
    EngineOverloadedError,
    InternalServerError,
    InvalidRequestError,
    NotFoundError,
    OpenAIError,
)
from schemas import anthropic
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


# The routes that answer errors as Anthropic does: by exact path, and Message Batches' by prefix.
ANTHROPIC_ROUTES = frozenset({"/v1/messages", "/v1/messages/count_tokens"})
ANTHROPIC_PREFIX = "/v1/messages/batches"
# Anthropic's status for load shedding: its clients retry it.
OVERLOADED = 529
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    OVERLOADED: "overloaded_error",
}


def anthropic_error(exc: BaseException) -> tuple[int, anthropic.ErrorResponse]:
    """The status and Anthropic's body for `exc`: its type from the status, as Anthropic's
    own errors are typed; an overloaded engine is Anthropic's 529."""
    error = to_openai_error(exc)
    status = OVERLOADED if isinstance(error, EngineOverloadedError) else error.status_code
    message = error.message
    if isinstance(error, ContextLengthExceededError):
        message = _too_long(error) or message
    return status, anthropic_body(status, message)


def _too_long(error: ContextLengthExceededError) -> str | None:
    """Anthropic's own words for a context too small, which agents match to compact their
    conversation (the prompt alone) or lower their max_tokens (prompt and output)."""
    if error.prompt_tokens is None or error.maximum is None:
        return None
    if error.max_tokens is None:
        return f"prompt is too long: {error.prompt_tokens} tokens > {error.maximum} maximum"
    return (
        f"input length and `max_tokens` exceed context limit: {error.prompt_tokens} + "
        f"{error.max_tokens} > {error.maximum}, decrease input length or `max_tokens` "
        "and try again"
    )


def anthropic_body(status: int, message: str) -> anthropic.ErrorResponse:
    """Anthropic's error body for an answer of `status`, typed from it as Anthropic types it."""
    kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return anthropic.ErrorResponse(error=anthropic.ErrorDetail(type=kind, message=message))


def _shaped(error: OpenAIError, path: str | None) -> tuple[int, bytes]:
    if path is not None and (path in ANTHROPIC_ROUTES or path.startswith(ANTHROPIC_PREFIX)):
        status, body = anthropic_error(error)
        return status, body.to_json()
    return error.status_code, error_body(error).to_json()


def error_response(exc: BaseException, path: str | None = None) -> Response:
    """The HTTP response for `exc` on the route `path`: status from its class, the body
    in the envelope the route's clients read."""
    error = to_openai_error(exc)
    # Starlette's own errors carry headers that must survive (405's Allow); ours
    # carry theirs (429's and 503's Retry-After).
    headers = exc.headers if isinstance(exc, HTTPException) else error.headers
    status, body = _shaped(error, path)
    return Response(body, status, headers, media_type="application/json")


async def refuse(exc: BaseException, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer `exc` from ASGI middleware: the HTTP response, or for a WebSocket handshake
    the same response where the server can send one (ASGI's denial-response extension),
    else a close before accepting (the client sees 403)."""
    if scope["type"] == "http":
        await error_response(exc, scope["path"])(scope, receive, send)
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


def exception_response(exc: Exception, path: str | None = None) -> Response:
    """The response to whatever the handler of the route `path` raised."""
    if isinstance(exc, ClientDisconnect):
        # Nobody is left to read an answer: not an error of the server, nothing to log.
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    return error_response(exc, path)


async def _handle(request: Request, exc: Exception) -> Response:
    return exception_response(exc, request.scope["path"])


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
