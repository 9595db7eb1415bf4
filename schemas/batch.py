"""The Files and Batch APIs: uploaded files, batches, and their lists."""

from __future__ import annotations

from typing import Literal

from schemas.common import Metadata, RequestModel, ResponseModel

BatchStatus = Literal[
    "validating",
    "failed",
    "in_progress",
    "finalizing",
    "completed",
    "expired",
    "cancelling",
    "cancelled",
]


class OpenAIFile(ResponseModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: str
    # Deprecated by OpenAI, still required by its schema: a stored file is processed.
    status: Literal["uploaded", "processed", "error"] = "processed"


class FileList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[OpenAIFile]
    first_id: str
    last_id: str
    has_more: bool


class FileDeleted(ResponseModel):
    id: str
    object: Literal["file"] = "file"
    deleted: bool


class CreateBatchRequest(RequestModel):
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: Metadata = None


class BatchError(ResponseModel):
    code: str
    message: str
    param: str | None = None
    line: int | None = None


class BatchErrors(ResponseModel):
    object: Literal["list"] = "list"
    data: list[BatchError]


class BatchRequestCounts(ResponseModel):
    total: int
    completed: int
    failed: int


class Batch(ResponseModel):
    id: str
    object: Literal["batch"] = "batch"
    endpoint: str
    model: str | None = None
    errors: BatchErrors | None = None
    input_file_id: str
    completion_window: str
    status: BatchStatus
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int
    in_progress_at: int | None = None
    expires_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    request_counts: BatchRequestCounts
    metadata: Metadata = None


class BatchList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[Batch]
    first_id: str
    last_id: str
    has_more: bool
