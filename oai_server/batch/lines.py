"""A batch's input file read into requests, and one request answered as an output line.

A line is refused while the batch validates exactly as its endpoint would refuse the same
body (the same schema, strictly, and the same service's `prepare`); a line that passes is
answered later by that same service, so its `body` is what the live endpoint answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oai_server.batch.endpoints import Body, Endpoint
from oai_server.error_responses import error_body, to_openai_error
from oai_server.errors import (
    EngineDeadError,
    EngineNotReadyError,
    EngineOverloadedError,
    ServerShuttingDownError,
)
from oai_server.ids import new_id
from schemas.batch import BatchError
from schemas.common import GenerationRequest
from schemas.responses import CreateResponse

# The server's state, not the line's fault: the line is left to run again (after a restart).
NOT_NOW = (EngineDeadError, EngineNotReadyError, EngineOverloadedError, ServerShuttingDownError)

# What the live route does to a body before its service sees it, for the batch's owner:
# the key's cache salt and the service tier it is served at.
Shaped = GenerationRequest | CreateResponse
Shape = Callable[[Shaped], Shaped]


@dataclass(frozen=True)
class Request:
    position: int  # 0-based; the error's `line` is position + 1
    custom_id: str
    body: Body


def _refused(line: int, code: str, message: str, param: str | None = None) -> BatchError:
    return BatchError(code=code, message=message, param=param, line=line)


async def _request(
    position: int,
    raw: bytes,
    url: str,
    endpoint: Endpoint,
    owner: str,
    shape: Shape,
    seen: set[str],
) -> Request | BatchError:
    line = position + 1
    try:
        item = json.loads(raw)
    except ValueError:
        return _refused(line, "invalid_json_line", "This line is not valid JSON.")
    if not isinstance(item, dict):
        return _refused(line, "invalid_json_line", "This line is not a JSON object.")
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return _refused(line, "missing_required_parameter", "Missing 'custom_id'.", "custom_id")
    if custom_id in seen:
        return _refused(
            line, "duplicate_custom_id", f"The custom_id '{custom_id}' is not unique.", "custom_id"
        )
    seen.add(custom_id)
    if item.get("method", "POST") != "POST":
        return _refused(line, "invalid_method", "The method must be 'POST'.", "method")
    if item.get("url") != url:
        return _refused(
            line, "invalid_url", f"The url must be the batch's endpoint, '{url}'.", "url"
        )
    body = item.get("body")
    try:
        # Strict, as the live endpoint parses it ("5" is not an integer).
        req = endpoint.schema.model_validate_json(json.dumps(body), strict=True)
        if isinstance(req, Shaped):
            req = shape(req)
        await endpoint.check(req, owner)
    except Exception as exc:  # noqa: BLE001 - whatever the endpoint refuses with
        error = to_openai_error(exc)
        return _refused(line, error.code or "invalid_request", error.message, error.param)
    return Request(position, custom_id, req)


async def read_requests(
    content: bytes, url: str, endpoint: Endpoint, owner: str, shape: Shape
) -> tuple[list[Request], list[BatchError]]:
    """Every line of a batch's input file (of `owner`) as a request, or why it is refused."""
    requests: list[Request] = []
    errors: list[BatchError] = []
    seen: set[str] = set()
    for position, raw in enumerate(content.splitlines()):
        if not raw.strip():
            continue  # a trailing newline, or a blank line, is no request
        read = await _request(position, raw, url, endpoint, owner, shape, seen)
        if isinstance(read, Request):
            requests.append(read)
        else:
            errors.append(read)
    if not requests and not errors:
        errors.append(BatchError(code="empty_file", message="The input file has no requests."))
    return requests, errors


async def answer_line(
    request: Request, endpoint: Endpoint, owner: str, priority: int | None
) -> tuple[bool, dict[str, Any]]:
    """The output line of one request (failed: whether it belongs in the error file).

    The same service as the live endpoint, not streamed; its refusals and the engine's
    failures become the line's `response` with the status and body the endpoint would send.
    An engine not serving now (loading, overloaded, stopping, dead) raises instead: no line
    is recorded, and the batch resumes when it serves again.
    """
    try:
        answer = await endpoint.answer(request.body, owner, priority)
        status, body = 200, json.loads(answer.to_json())
    except NOT_NOW:
        raise
    except Exception as exc:  # noqa: BLE001 - a line that fails is an error line, never a stuck batch
        error = to_openai_error(exc)
        status, body = error.status_code, json.loads(error_body(error).to_json())
    return status != 200, output_line(request.custom_id, status, body)


def output_line(custom_id: str, status: int, body: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's output (or error) file line."""
    return {
        "id": new_id("batch_req"),
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": new_id("req"), "body": body},
        "error": None,
    }


def expired_line(custom_id: str) -> dict[str, Any]:
    """The error line of a request the batch's window closed on before it ran."""
    return {
        "id": new_id("batch_req"),
        "custom_id": custom_id,
        "response": None,
        "error": {
            "code": "batch_expired",
            "message": "This request could not be executed before the completion window expired.",
        },
    }
