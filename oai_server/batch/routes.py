"""`/v1/files` and `/v1/batches`: each reads or changes only its caller's own objects."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.datastructures import UploadFile

from oai_server.batch.endpoints import Endpoint
from oai_server.batch.records import ACTIVE, BatchRecords, StoredFile, now_us
from oai_server.errors import InvalidRequestError, NotFoundError, RequestTooLargeError
from oai_server.http.answer import json_response
from oai_server.http.parsing import parse_body
from oai_server.ids import new_id
from oai_server.services.metadata import check_metadata
from oai_server.store.params import list_object, list_query
from oai_server.store.service import StoreService, owner_of
from schemas.batch import (
    Batch,
    BatchList,
    CreateBatchRequest,
    FileDeleted,
    FileList,
    OpenAIFile,
)

WINDOW_S = 86_400  # "24h", the one window OpenAI offers
# Room for the multipart framing around the file itself.
FORM_OVERHEAD = 64 * 1024


# A batch's input lines, or an image a Responses `input_image` names by `file_id`.
FILE_PURPOSES = frozenset({"batch", "vision", "user_data"})


def _file(file: StoredFile) -> OpenAIFile:
    return OpenAIFile(
        id=file.id,
        bytes=file.bytes,
        created_at=file.created_at // 1_000_000,
        filename=file.filename,
        purpose=file.purpose,
    )


def _file_missing(file_id: str) -> NotFoundError:
    return NotFoundError(f"No such File object: {file_id}", param="file_id")


def _batch_missing(batch_id: str) -> NotFoundError:
    return NotFoundError(f"No batch found with id '{batch_id}'.", param="batch_id")


def _check_jsonl(content: bytes) -> None:
    """A batch file is JSON Lines: one JSON object a line (blank lines aside)."""
    try:
        for number, raw in enumerate(content.decode("utf-8").splitlines(), 1):
            if raw.strip() and not isinstance(json.loads(raw), dict):
                raise ValueError(number)
    except ValueError:
        raise InvalidRequestError(
            "The file is not valid JSONL: every line must be one JSON object.",
            param="file",
            code="invalid_file_format",
        ) from None


def routes(
    store: StoreService,
    records: BatchRecords,
    endpoints: Mapping[str, Endpoint],
    max_bytes: int,
    wake: Any,
    announce: Callable[[str], None],
) -> APIRouter:
    """The Files and Batch API's routes, on `records` (read through `store`'s guard);
    `announce` is told each batch created, by the request creating it."""
    router = APIRouter()

    @router.post("/v1/files")
    async def create_file(request: Request) -> Response:
        declared = request.headers.get("content-length")
        if (
            declared is not None
            and declared.isdigit()
            and int(declared) > max_bytes + FORM_OVERHEAD
        ):
            raise RequestTooLargeError(f"The file exceeds the limit of {max_bytes} bytes.")
        # The form's spooled upload is closed when the block ends, whatever is refused.
        async with request.form(max_files=1, max_fields=4) as form:
            upload, purpose = form.get("file"), form.get("purpose")
            if not isinstance(upload, UploadFile):
                raise InvalidRequestError("Missing required parameter: 'file'.", param="file")
            if purpose not in FILE_PURPOSES:
                raise InvalidRequestError(
                    f"Invalid 'purpose': {purpose!r}; this server accepts 'batch', and "
                    "'vision' or 'user_data' for images a Responses request names.",
                    param="purpose",
                    code="invalid_value",
                )
            filename = (upload.filename or "upload.jsonl")[:256]
            content = await upload.read(max_bytes + 1)
        if len(content) > max_bytes:
            raise RequestTooLargeError(f"The file exceeds the limit of {max_bytes} bytes.")
        if purpose == "batch":
            _check_jsonl(content)
        file = StoredFile(
            id=new_id("file", "-"),
            owner=owner_of(request),
            purpose=purpose,
            filename=filename,
            bytes=len(content),
            created_at=now_us(),
        )
        async with store.reading():
            await records.put_file(file, content)
        return json_response(_file(file))

    @router.get("/v1/files")
    async def list_files(request: Request) -> Response:
        params = request.query_params
        query = list_query(params, filters=False)
        if "order" not in params:  # OpenAI lists files newest first
            query = list_query(params.__class__({**params, "order": "desc"}), filters=False)
        async with store.reading():
            page = await records.files(owner_of(request), query, params.get("purpose"))
        return json_response(list_object(FileList, [_file(f) for f in page.data], page.has_more))

    @router.get("/v1/files/{file_id}")
    async def retrieve_file(request: Request, file_id: str) -> Response:
        owner = owner_of(request)
        file = await store.found(lambda: records.file(file_id, owner), _file_missing(file_id))
        return json_response(_file(file))

    @router.get("/v1/files/{file_id}/content")
    async def file_content(request: Request, file_id: str) -> Response:
        owner = owner_of(request)
        content = await store.found(lambda: records.content(file_id, owner), _file_missing(file_id))
        return Response(content, media_type="application/octet-stream")

    @router.delete("/v1/files/{file_id}")
    async def delete_file(request: Request, file_id: str) -> Response:
        owner = owner_of(request)
        await store.found(lambda: records.delete_file(file_id, owner), _file_missing(file_id))
        return json_response(FileDeleted(id=file_id, deleted=True))

    @router.post("/v1/batches")
    async def create_batch(request: Request) -> Response:
        req = await parse_body(request, CreateBatchRequest, 1_000_000)
        if req.endpoint not in endpoints:
            raise InvalidRequestError(
                f"Invalid 'endpoint': '{req.endpoint}'; one of {', '.join(endpoints)}.",
                param="endpoint",
                code="invalid_value",
            )
        if req.completion_window != "24h":
            raise InvalidRequestError(
                "Invalid 'completion_window': only '24h' is supported.",
                param="completion_window",
                code="invalid_value",
            )
        check_metadata(req.metadata)
        owner = owner_of(request)
        file = await store.found(
            lambda: records.file(req.input_file_id, owner), _file_missing(req.input_file_id)
        )
        if file.purpose != "batch":
            raise InvalidRequestError(
                "The input file's purpose must be 'batch'.", param="input_file_id"
            )
        created = now_us()
        batch = Batch(
            id=new_id("batch"),
            endpoint=req.endpoint,
            input_file_id=req.input_file_id,
            completion_window="24h",
            status="validating",
            created_at=created // 1_000_000,
            expires_at=created // 1_000_000 + WINDOW_S,
            request_counts={"total": 0, "completed": 0, "failed": 0},
            metadata=req.metadata,
        )
        body = batch.model_dump(mode="json", exclude_none=True)
        async with store.reading():
            await records.put_batch(batch.id, owner, created, body)
        announce(batch.id)
        wake.set()
        return json_response(batch)

    async def current(batch_id: str, owner: str) -> Batch:
        body: dict[str, Any] = await store.found(
            lambda: records.batch(batch_id, owner), _batch_missing(batch_id)
        )
        if body["status"] in ACTIVE:
            async with store.reading():
                completed, failed = await records.counts(batch_id)
            body["request_counts"].update(completed=completed, failed=failed)
        return Batch.model_validate(body)

    @router.get("/v1/batches/{batch_id}")
    async def retrieve_batch(request: Request, batch_id: str) -> Response:
        return json_response(await current(batch_id, owner_of(request)))

    @router.get("/v1/batches")
    async def list_batches(request: Request) -> Response:
        params = request.query_params
        query = list_query(params.__class__({**params, "order": "desc"}), filters=False)
        async with store.reading():
            page = await records.batches(owner_of(request), query)
        data = [Batch.model_validate(body) for body in page.data]
        return json_response(list_object(BatchList, data, page.has_more))

    @router.post("/v1/batches/{batch_id}/cancel")
    async def cancel_batch(request: Request, batch_id: str) -> Response:
        owner = owner_of(request)
        while True:
            batch = await current(batch_id, owner)
            if batch.status not in ("validating", "in_progress"):
                return json_response(batch)
            body = batch.model_dump(mode="json", exclude_none=True)
            body.update(status="cancelling", cancelling_at=int(time.time()))
            async with store.reading():
                # Only from the status read: a runner's concurrent change is never overwritten.
                if await records.set_batch(batch_id, body, only_from=(batch.status,)):
                    wake.set()
                    return json_response(Batch.model_validate(body))

    return router
