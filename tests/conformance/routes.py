"""Which spec schema a response of a given endpoint must meet."""

from __future__ import annotations

import re
from typing import Final

import httpx

from tests.conformance.schemas import COMPLETION_STREAM_SCHEMA

# --------------------------------------------------------------------------
# Endpoint -> schema
# --------------------------------------------------------------------------

_PREFIX: Final = r"(?:/.*)?/v1"
_STORED: Final = _PREFIX + r"/chat/completions/[^/]+"
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
    # Stored chat completions.
    (
        "GET",
        re.compile(_PREFIX + r"/chat/completions/?"),
        "ChatCompletionList",
        "ChatCompletionList",
    ),
    (
        "GET",
        re.compile(_STORED + r"/messages/?"),
        "ChatCompletionMessageList",
        "ChatCompletionMessageList",
    ),
    (
        "GET",
        re.compile(_STORED + "/?"),
        "CreateChatCompletionResponse",
        "CreateChatCompletionResponse",
    ),
    (
        "POST",
        re.compile(_STORED + "/?"),
        "CreateChatCompletionResponse",
        "CreateChatCompletionResponse",
    ),
    ("DELETE", re.compile(_STORED + "/?"), "ChatCompletionDeleted", "ChatCompletionDeleted"),
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
