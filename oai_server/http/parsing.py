"""Read a request body into a schema: size-limited, strict JSON validation."""

from __future__ import annotations

from typing import TypeVar

from fastapi import Request
from starlette.requests import ClientDisconnect

from oai_server.errors import RequestTooLargeError
from schemas.common import RequestModel

M = TypeVar("M", bound=RequestModel)


async def parse_body(request: Request, model: type[M], max_bytes: int) -> M:
    """The body as `model`, validated strictly (`"5"` is not an integer), or a typed error.

    Read from the ASGI messages themselves (the body is read once, here): Starlette's
    `Request.stream()` is an async generator, which cost more than the reading.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    pieces: list[bytes] = []
    size = 0
    while True:
        message = await request.receive()
        if message["type"] != "http.request":
            raise ClientDisconnect()
        piece: bytes = message.get("body", b"")
        size += len(piece)
        if size > max_bytes:
            raise _too_large(max_bytes)
        pieces.append(piece)
        if not message.get("more_body", False):
            break
    body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    return model.model_validate_json(body, strict=True)


def _too_large(max_bytes: int) -> RequestTooLargeError:
    return RequestTooLargeError(f"The request body exceeds the limit of {max_bytes} bytes.")
