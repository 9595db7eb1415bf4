"""Anthropic's Message Batches (`/v1/messages/batches`) on the wire.

The `anthropic` SDK's `client.messages.batches` types are the reference for every field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from schemas.anthropic import ErrorResponse, MessagesRequest
from schemas.common import RequestModel, ResponseModel


class BatchRequestItem(RequestModel):
    custom_id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")]
    params: MessagesRequest


class CreateMessageBatchRequest(RequestModel):
    """`POST /v1/messages/batches`."""

    requests: Annotated[list[BatchRequestItem], Field(min_length=1, max_length=100_000)]


class MessageBatchRequestCounts(ResponseModel):
    processing: int = 0
    succeeded: int = 0
    errored: int = 0
    canceled: int = 0
    expired: int = 0


class MessageBatch(ResponseModel):
    id: str
    type: Literal["message_batch"] = "message_batch"
    processing_status: Literal["in_progress", "canceling", "ended"]
    request_counts: MessageBatchRequestCounts
    created_at: datetime
    expires_at: datetime
    ended_at: datetime | None = None
    cancel_initiated_at: datetime | None = None
    archived_at: datetime | None = None
    results_url: str | None = None


class MessageBatchList(ResponseModel):
    data: list[MessageBatch]
    has_more: bool
    first_id: str | None = None
    last_id: str | None = None


class DeletedMessageBatch(ResponseModel):
    id: str
    type: Literal["message_batch_deleted"] = "message_batch_deleted"


class SucceededResult(ResponseModel):
    type: Literal["succeeded"] = "succeeded"
    message: dict[str, Any]  # a `Message`, as the engine answered it


class ErroredResult(ResponseModel):
    type: Literal["errored"] = "errored"
    error: ErrorResponse


class CanceledResult(ResponseModel):
    type: Literal["canceled"] = "canceled"


class ExpiredResult(ResponseModel):
    type: Literal["expired"] = "expired"


class IndividualResponse(ResponseModel):
    """One line of a batch's results (JSONL)."""

    custom_id: str
    result: SucceededResult | ErroredResult | CanceledResult | ExpiredResult
