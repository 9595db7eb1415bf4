"""Documents from OpenAI's spec and helpers shared by the conformance checker's tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conformance import (
    validate,
)

# The spec's own example of a chat completion (CreateChatCompletionResponse x-oaiMeta).
CHAT_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "The image shows a wooden boardwalk path running through a field.",
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 1117,
        "completion_tokens": 46,
        "total_tokens": 1163,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
    "system_fingerprint": "fp_fc9f1d7035",
}

# The spec's example chunks (CreateChatCompletionStreamResponse x-oaiMeta).
CHUNKS: list[dict[str, Any]] = [
    {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    for delta, finish in [
        ({"role": "assistant", "content": ""}, None),
        ({"content": "Hello"}, None),
        ({}, "stop"),
    ]
]

COMPLETION: dict[str, Any] = {
    "id": "cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7",
    "object": "text_completion",
    "created": 1589478378,
    "model": "gpt-4-turbo",
    "choices": [
        {
            "text": "\n\nThis is indeed a test",
            "index": 0,
            "logprobs": None,
            "finish_reason": "length",
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
}

MODEL: dict[str, Any] = {
    "id": "m",
    "object": "model",
    "created": 1686935002,
    "owned_by": "oai-server",
}

ERROR: dict[str, Any] = {
    "error": {"message": "x", "type": "invalid_request_error", "param": None, "code": None}
}


RESPONSE_SCHEMAS = (
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "CreateCompletionResponse",
    "ListModelsResponse",
    "Model",
    "ErrorResponse",
)


def sse(*events: object) -> bytes:
    """An event-stream body: each event JSON-encoded (strings sent verbatim)."""
    return b"".join(
        f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events
    )


def fails(schema: str, instance: object, *needles: str) -> None:
    with pytest.raises(AssertionError) as info:
        validate(schema, instance)
    for needle in needles:
        assert needle in str(info.value)


Handler = Callable[[httpx.Request], httpx.Response]


def reply(
    body: object = None, *, status: int = 200, content: bytes | None = None, **headers: str
) -> Handler:
    if content is None:
        content = json.dumps(body).encode()
        headers.setdefault("content-type", "application/json")
    headers = {k.replace("_", "-"): v for k, v in headers.items()}
    return lambda request: httpx.Response(status, headers=headers, content=content)
