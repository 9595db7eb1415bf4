"""OpenAI's limits on a request's `metadata` (chat, responses, conversations, stored objects):
16 pairs, keys up to 64 characters, values up to 512."""

from __future__ import annotations

from collections.abc import Mapping

from oai_server.errors import InvalidRequestError

MAX_PAIRS = 16
MAX_KEY_LENGTH = 64
MAX_VALUE_LENGTH = 512


def check_metadata(metadata: Mapping[str, str] | None, param: str = "metadata") -> None:
    """Raise a 400 naming the offending field unless `metadata` is within OpenAI's limits."""
    if metadata is None:
        return
    if len(metadata) > MAX_PAIRS:
        raise InvalidRequestError(
            f"Invalid '{param}': at most {MAX_PAIRS} key-value pairs are allowed, "
            f"got {len(metadata)}.",
            param=param,
            code="invalid_value",
        )
    for key, value in metadata.items():
        if len(key) > MAX_KEY_LENGTH:
            raise InvalidRequestError(
                f"Invalid '{param}': keys may be at most {MAX_KEY_LENGTH} characters long, "
                f"got a key of {len(key)}.",
                param=param,
                code="invalid_value",
            )
        if len(value) > MAX_VALUE_LENGTH:
            raise InvalidRequestError(
                f"Invalid '{param}.{key}': values may be at most {MAX_VALUE_LENGTH} characters "
                f"long, got {len(value)}.",
                param=f"{param}.{key}",
                code="invalid_value",
            )
