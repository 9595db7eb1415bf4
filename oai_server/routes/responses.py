"""JSON responses from response models."""

from __future__ import annotations

from fastapi import Response

from schemas.common import ResponseModel


def json_response(body: ResponseModel, status_code: int = 200) -> Response:
    return Response(body.to_json(), status_code, media_type="application/json")
