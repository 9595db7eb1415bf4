"""Anthropic's Message Batches (`/v1/messages/batches`), on the Batch API's runner.

A Message Batch is a batch of the Batch API whose endpoint is `/v1/messages`: its
requests become an input file of `/v1/messages` lines, the one runner answers them on
the idle engine (`MessagesEndpoint`, the live route's answer, not streamed), and the
routes read the batch's record and its output and error files in Anthropic's shapes:
`processing_status` from the status, `request_counts` and the results (JSONL) from the
finished lines. Ids start `msgbatch_`, so the list holds only Message Batches.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response

from oai_server.anthropic.errors import anthropic_body
from oai_server.anthropic.stream import MessageRun
from oai_server.anthropic.translate import chat_request
from oai_server.batch import BatchRunner
from oai_server.batch.endpoints import Endpoint
from oai_server.batch.records import StoredFile, now_us
from oai_server.errors import InvalidRequestError, NotFoundError
from oai_server.http.answer import json_response
from oai_server.http.parsing import parse_body
from oai_server.ids import new_id
from oai_server.state import ServerState
from oai_server.store.interface import ListQuery
from oai_server.store.service import StoreService, owner_of
from schemas.anthropic import MessagesRequest
from schemas.anthropic_batches import (
    CanceledResult,
    CreateMessageBatchRequest,
    DeletedMessageBatch,
    ErroredResult,
    ExpiredResult,
    IndividualResponse,
    MessageBatch,
    MessageBatchList,
    MessageBatchRequestCounts,
    SucceededResult,
)
from schemas.batch import Batch

URL = "/v1/messages"
PREFIX = "msgbatch"
WINDOW_S = 86_400  # Anthropic's: 24 hours
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})


class MessagesEndpoint(Endpoint):
    """`/v1/messages` lines: the live route's message, for the batch's owner."""

    schema = MessagesRequest

    def __init__(self, core: ServerState) -> None:
        self.core = core

    def _chat(self, body: MessagesRequest, owner: str, priority: int | None = None) -> Any:
        chat = self.core.for_caller(chat_request(body), owner or None)
        return chat if priority is None else chat.model_copy(update={"priority": priority})

    async def check(self, body: Any, owner: str) -> None:
        if body.stream:
            raise InvalidRequestError("A batch request cannot be streamed.", param="stream")
        # Its images are fetched and decoded when the line runs, not all at creation.
        await self.core.chat.prepare(self._chat(body, owner), load=False)

    async def answer(self, body: Any, owner: str, priority: int | None) -> Any:
        service = self.core.chat
        job = await service.prepare(self._chat(body, owner, priority))
        run = MessageRun.of(new_id("msg"), body.model, job.prompt_tokens)
        return await run.whole(service.stream(await service.start(job)))


def _at(seconds: int | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _missing(batch_id: str) -> NotFoundError:
    return NotFoundError(f"No message batch found with id '{batch_id}'.", param="message_batch_id")


def _custom_ids(content: bytes) -> list[str]:
    return [json.loads(raw)["custom_id"] for raw in content.splitlines() if raw.strip()]


def _result(line: dict[str, Any], status: str) -> IndividualResponse:
    """A finished output or error line as Anthropic's result."""
    response = line.get("response")
    if response is not None and response["status_code"] == 200:
        result: Any = SucceededResult(message=response["body"])
    elif response is not None:
        message = response["body"].get("error", {}).get("message", "The request failed.")
        result = ErroredResult(error=anthropic_body(response["status_code"], message))
    elif status == "expired":
        result = ExpiredResult()
    else:
        result = ErroredResult(error=anthropic_body(500, line["error"]["message"]))
    return IndividualResponse(custom_id=line["custom_id"], result=result)


def routes(store: StoreService, runner: BatchRunner, announce: Callable[[str], None]) -> APIRouter:
    """The Message Batches routes, on `runner`'s records; `announce` is told each batch
    created (its trace link), as `/v1/batches` tells it."""
    router = APIRouter()
    records = runner.records
    endpoint = runner.endpoints[URL]

    async def read(batch_id: str, owner: str) -> dict[str, Any]:
        if not batch_id.startswith(f"{PREFIX}_"):
            raise _missing(batch_id)
        body: dict[str, Any] = await store.found(
            lambda: records.batch(batch_id, owner), _missing(batch_id)
        )
        return body

    async def content(file_id: str | None) -> bytes:
        if file_id is None:
            return b""
        async with store.reading():
            return await records.content(file_id, None) or b""

    async def results(body: dict[str, Any]) -> list[IndividualResponse]:
        """Every request's result, once the batch has ended."""
        out = [
            _result(json.loads(raw), body["status"])
            for key in ("output_file_id", "error_file_id")
            for raw in (await content(body.get(key))).splitlines()
            if raw.strip()
        ]
        answered = {r.custom_id for r in out}
        rest: Any = ExpiredResult() if body["status"] == "expired" else CanceledResult()
        if body["status"] == "failed":
            errors = body.get("errors", {}).get("data") or [{"message": "The batch failed."}]
            rest = ErroredResult(error=anthropic_body(400, errors[0]["message"]))
        for custom_id in _custom_ids(await content(body["input_file_id"])):
            if custom_id not in answered:
                out.append(IndividualResponse(custom_id=custom_id, result=rest))
        return out

    async def view(request: Request, body: dict[str, Any]) -> MessageBatch:
        status = body["status"]
        ended = status in ENDED
        # Every request counts as processing until the batch ends, as Anthropic counts;
        # then each as its result says (one reading of the finished lines, as `results`).
        counts = MessageBatchRequestCounts()
        if ended:
            for r in await results(body):
                kind = r.result.type
                setattr(counts, kind, getattr(counts, kind) + 1)
        else:
            counts.processing = body["request_counts"]["total"]
        processing = "ended" if ended else "canceling" if status == "cancelling" else "in_progress"
        root = str(request.base_url).rstrip("/")
        return MessageBatch(
            id=body["id"],
            processing_status=processing,
            request_counts=counts,
            created_at=_at(body["created_at"]),
            expires_at=_at(body["expires_at"]),
            ended_at=_at(body.get(f"{status}_at")) if ended else None,
            cancel_initiated_at=_at(body.get("cancelling_at")),
            results_url=f"{root}{URL}/batches/{body['id']}/results" if ended else None,
        )

    @router.post(f"{URL}/batches")
    async def create(request: Request) -> Response:
        req = await parse_body(request, CreateMessageBatchRequest, 256_000_000)
        owner = owner_of(request)
        seen: set[str] = set()
        for i, item in enumerate(req.requests):
            if item.custom_id in seen:
                raise InvalidRequestError(
                    f"Duplicate custom_id '{item.custom_id}'.", param=f"requests[{i}].custom_id"
                )
            seen.add(item.custom_id)
            try:
                await endpoint.check(item.params, owner)
            except InvalidRequestError as exc:
                param = f"requests[{i}].params" + (f".{exc.param}" if exc.param else "")
                raise InvalidRequestError(f"{param}: {exc.message}", param=param) from None
        lines = [
            {
                "custom_id": item.custom_id,
                "method": "POST",
                "url": URL,
                "body": item.params.model_dump(mode="json", exclude_unset=True),
            }
            for item in req.requests
        ]
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        created = now_us()
        file = StoredFile(
            new_id("file", "-"), owner, "batch", "message_batch.jsonl", len(data), created
        )
        seconds = created // 1_000_000
        # A batch of the Batch API, as `/v1/batches` lists it too.
        body = Batch(
            id=new_id(PREFIX),
            endpoint=URL,
            input_file_id=file.id,
            completion_window="24h",
            status="validating",
            created_at=seconds,
            expires_at=seconds + WINDOW_S,
            request_counts={"total": len(lines), "completed": 0, "failed": 0},
        ).model_dump(mode="json", exclude_none=True)
        async with store.reading():
            await records.put_file(file, data)
            await records.put_batch(body["id"], owner, created, body)
        announce(body["id"])
        runner.wake.set()
        return json_response(await view(request, body))

    @router.get(f"{URL}/batches/{{batch_id}}")
    async def retrieve(request: Request, batch_id: str) -> Response:
        return json_response(await view(request, await read(batch_id, owner_of(request))))

    @router.get(f"{URL}/batches")
    async def list_batches(request: Request) -> Response:
        params = request.query_params
        try:
            limit = int(params.get("limit", "20"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            raise InvalidRequestError("limit: must be from 1 to 1000.", param="limit")
        before, after = params.get("before_id"), params.get("after_id")
        # Newest first; `before_id` pages toward newer ones, read oldest first and turned.
        query = ListQuery(after=before or after, limit=limit, order="asc" if before else "desc")
        async with store.reading():
            page = await records.batches(owner_of(request), query, id_prefix=f"{PREFIX}_")
        bodies = page.data[::-1] if before else page.data
        data = [await view(request, body) for body in bodies]
        return json_response(
            MessageBatchList(
                data=data,
                has_more=page.has_more,
                first_id=data[0].id if data else None,
                last_id=data[-1].id if data else None,
            )
        )

    @router.post(f"{URL}/batches/{{batch_id}}/cancel")
    async def cancel(request: Request, batch_id: str) -> Response:
        owner = owner_of(request)
        while True:
            body = await read(batch_id, owner)
            if body["status"] not in ("validating", "in_progress"):
                return json_response(await view(request, body))
            was = body["status"]
            body.update(status="cancelling", cancelling_at=int(time.time()))
            async with store.reading():
                # Only from the status read: a runner's concurrent change is never overwritten.
                if await records.set_batch(batch_id, body, only_from=(was,)):
                    runner.wake.set()
                    return json_response(await view(request, body))

    @router.delete(f"{URL}/batches/{{batch_id}}")
    async def delete(request: Request, batch_id: str) -> Response:
        owner = owner_of(request)
        body = await read(batch_id, owner)
        if body["status"] not in ENDED:
            raise InvalidRequestError(
                "A message batch can be deleted only once it has ended; cancel it first."
            )
        async with store.reading():
            await records.delete_batch(batch_id, owner)
        return json_response(DeletedMessageBatch(id=batch_id))

    @router.get(f"{URL}/batches/{{batch_id}}/results")
    async def batch_results(request: Request, batch_id: str) -> Response:
        body = await read(batch_id, owner_of(request))
        if body["status"] not in ENDED:
            raise InvalidRequestError(f"Message batch '{batch_id}' has not ended yet.")
        data = "".join(r.to_json().decode() + "\n" for r in await results(body))
        return Response(data, media_type="application/binary")

    return router
