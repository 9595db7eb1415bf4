"""Typed exceptions raised inside the server and its engines.

Every failure a client can see is one of these; `oai_server/error_responses.py`
turns them into OpenAI's error envelope, in one place. An error may carry HTTP
headers the client needs (`Retry-After` on a 429 or a 503)::

    OpenAIError                      (status, type, code carried by each class)
    ├── InvalidRequestError          400 invalid_request_error
    │   ├── UnsupportedParameterError    400, code "unsupported_parameter"
    │   └── ContextLengthExceededError   400, code "context_length_exceeded"
    ├── AuthenticationError          401 invalid_request_error, code "invalid_api_key"
    ├── PermissionDeniedError        403 invalid_request_error, code "insufficient_permissions"
    ├── NotFoundError                404 invalid_request_error
    │   └── ModelNotFoundError           404, code "model_not_found"
    ├── RequestTooLargeError         413 invalid_request_error
    ├── RateLimitError               429 requests | tokens, code "rate_limit_exceeded"
    ├── EngineNotReadyError          503 service_unavailable
    ├── EngineOverloadedError        503 service_unavailable (queue limits: retry elsewhere)
    ├── ServerShuttingDownError      503 service_unavailable (draining after SIGTERM)
    ├── EngineDeadError              503 service_unavailable
    ├── GenerationAbortedError       503 service_unavailable (the engine dropped the request)
    ├── StoreUnavailableError        503 service_unavailable (stored objects: database down)
    └── InternalServerError          500 server_error
        └── GenerationFailedError        500, code "generation_failed"
"""

from __future__ import annotations


class OpenAIError(Exception):
    """Base of every error the server reports to clients."""

    status_code = 500
    type = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers: dict[str, str] = dict(headers or {})
        if code is not None:
            self.code = code


class InvalidRequestError(OpenAIError):
    status_code = 400
    type = "invalid_request_error"


class UnsupportedParameterError(InvalidRequestError):
    code = "unsupported_parameter"


class ContextLengthExceededError(InvalidRequestError):
    """A prompt of `prompt_tokens` (and `max_tokens` asked for, where those count) past the
    context's `maximum`: the Messages API words the error as Anthropic's does with them, for
    the agents that recognise it (to compact a conversation, or lower their max_tokens)."""

    code = "context_length_exceeded"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        prompt_tokens: int | None = None,
        max_tokens: int | None = None,
        maximum: int | None = None,
    ) -> None:
        super().__init__(message, param=param)
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.maximum = maximum


class AuthenticationError(OpenAIError):
    status_code = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class PermissionDeniedError(OpenAIError):
    status_code = 403
    type = "invalid_request_error"
    code = "insufficient_permissions"


class NotFoundError(OpenAIError):
    status_code = 404
    type = "invalid_request_error"


class ModelNotFoundError(NotFoundError):
    code = "model_not_found"


class RequestTooLargeError(OpenAIError):
    status_code = 413
    type = "invalid_request_error"
    code = "request_too_large"


class EngineNotReadyError(OpenAIError):
    status_code = 503
    type = "service_unavailable"
    code = "engine_not_ready"


class RateLimitError(OpenAIError):
    """Over a per-key limit; `type` is "requests" or "tokens", as OpenAI says which."""

    status_code = 429
    type = "requests"
    code = "rate_limit_exceeded"


# Seconds a client is told to wait before retrying a 503 for capacity or shutdown.
RETRY_AFTER_BUSY_S = 1


class EngineOverloadedError(OpenAIError):
    status_code = 503
    type = "service_unavailable"
    code = "server_overloaded"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(
            message, headers={"Retry-After": str(RETRY_AFTER_BUSY_S), **(headers or {})}
        )


class ServerShuttingDownError(OpenAIError):
    status_code = 503
    type = "service_unavailable"
    code = "server_shutting_down"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"Retry-After": str(RETRY_AFTER_BUSY_S)})


class EngineDeadError(OpenAIError):
    status_code = 503
    type = "service_unavailable"
    code = "engine_dead"


class StoreUnavailableError(OpenAIError):
    status_code = 503
    type = "service_unavailable"
    code = "store_unavailable"


class InternalServerError(OpenAIError):
    status_code = 500
    type = "server_error"


class GenerationAbortedError(OpenAIError):
    status_code = 503
    type = "service_unavailable"
    code = "request_aborted"


class GenerationFailedError(InternalServerError):
    code = "generation_failed"
