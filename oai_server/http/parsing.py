"""Read a request body into a schema: size-limited, strict JSON validation."""

from __future__ import annotations

from typing import TypeVar

from fastapi import Request

from oai_server.errors import RequestTooLargeError
from schemas.common import RequestModel

M = TypeVar("M", bound=RequestModel)


async def parse_body(request: Request, model: type[M], max_bytes: int) -> M:
    """The body as `model`, validated strictly (`"5"` is not an integer), or a typed error."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise RequestTooLargeError(f"The request body exceeds the limit of {max_bytes} bytes.")
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > max_bytes:
            raise RequestTooLargeError(f"The request body exceeds the limit of {max_bytes} bytes.")
    return model.model_validate_json(bytes(body), strict=True)
