"""Anthropic's error envelope: `{"type": "error", "error": {"type", "message"}}`.

Anthropic types its errors by their status, and sheds load with 529, which its clients
retry. The feature registers `ERROR_SHAPE` for the paths under `/v1/messages`, so every
refusal there (before routing included) comes out in this envelope from the app's one
error function (`oai_server.error_responses`); a stream that fails after it started, and a
Message Batch's errored result, use the same body.
"""

from __future__ import annotations

from oai_server.error_responses import ErrorShape, to_openai_error
from oai_server.errors import ContextLengthExceededError, EngineOverloadedError, OpenAIError
from schemas.anthropic import ErrorDetail, ErrorResponse

# Anthropic's status for load shedding: its clients retry it.
OVERLOADED = 529
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    OVERLOADED: "overloaded_error",
}


def anthropic_error(exc: BaseException) -> tuple[int, ErrorResponse]:
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


def anthropic_body(status: int, message: str) -> ErrorResponse:
    """Anthropic's error body for an answer of `status`, typed from it as Anthropic types it."""
    kind = _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return ErrorResponse(error=ErrorDetail(type=kind, message=message))


def _shaped(error: OpenAIError) -> tuple[int, bytes]:
    status, body = anthropic_error(error)
    return status, body.to_json()


# `/v1/messages`, `/v1/messages/count_tokens`, `/v1/messages/batches/...`.
ERROR_SHAPE = ErrorShape("/v1/messages", _shaped)
