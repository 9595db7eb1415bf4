"""Stored chat completions: `GET /v1/chat/completions`, `GET|POST|DELETE .../{completion_id}`,
`GET .../{completion_id}/messages`. Each reads or changes only the caller's own objects."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.errors import NotFoundError
from oai_server.http.answer import json_response
from oai_server.http.parsing import parse_body
from oai_server.state import server_state
from oai_server.store.chat_records import KIND, store_message, stored_completion
from oai_server.store.interface import ListQuery
from oai_server.store.limits import check_metadata
from oai_server.store.params import list_query
from oai_server.store.service import StoreService
from schemas.stored import (
    ChatCompletionDeleted,
    ChatCompletionList,
    ChatCompletionMessageList,
    UpdateChatCompletionRequest,
)

router = APIRouter()


def store_service(request: Request) -> StoreService:
    service: StoreService = request.app.state.store
    return service


def owner_of(request: Request) -> str:
    """Whose objects this request sees: the auth middleware's principal, or "" without keys."""
    principal: str | None = getattr(request.state, "principal", None)
    return principal or ""


def _not_found(completion_id: str) -> NotFoundError:
    return NotFoundError(
        f"No stored chat completion found with id '{completion_id}'.", param="completion_id"
    )


@router.get("/v1/chat/completions")
async def list_chat_completions(request: Request) -> Response:
    query = list_query(request.query_params, filters=True)
    service = store_service(request)
    async with service.reading():
        page = await service.store.list(KIND, owner_of(request), query)
    data = [stored_completion(obj) for obj in page.data]
    return json_response(
        ChatCompletionList(
            data=data,
            first_id=data[0].id if data else "",
            last_id=data[-1].id if data else "",
            has_more=page.has_more,
        )
    )


@router.get("/v1/chat/completions/{completion_id}")
async def retrieve_chat_completion(completion_id: str, request: Request) -> Response:
    service = store_service(request)
    async with service.reading():
        obj = await service.store.get(KIND, completion_id, owner_of(request))
    if obj is None:
        raise _not_found(completion_id)
    return json_response(stored_completion(obj))


@router.post("/v1/chat/completions/{completion_id}")
async def update_chat_completion(completion_id: str, request: Request) -> Response:
    settings = server_state(request).settings
    body = await parse_body(request, UpdateChatCompletionRequest, settings.max_request_bytes)
    check_metadata(body.metadata)
    service = store_service(request)
    async with service.reading():
        obj = await service.store.update(
            KIND, completion_id, owner_of(request), metadata=body.metadata or {}
        )
    if obj is None:
        raise _not_found(completion_id)
    return json_response(stored_completion(obj))


@router.delete("/v1/chat/completions/{completion_id}")
async def delete_chat_completion(completion_id: str, request: Request) -> Response:
    service = store_service(request)
    async with service.reading():
        deleted = await service.store.delete(KIND, completion_id, owner_of(request))
    if not deleted:
        raise _not_found(completion_id)
    return json_response(ChatCompletionDeleted(id=completion_id, deleted=True))


@router.get("/v1/chat/completions/{completion_id}/messages")
async def list_chat_completion_messages(completion_id: str, request: Request) -> Response:
    query: ListQuery = list_query(request.query_params, filters=False)
    service = store_service(request)
    async with service.reading():
        page = await service.store.list_items(KIND, completion_id, owner_of(request), query)
    if page is None:
        raise _not_found(completion_id)
    data = [store_message(item) for item in page.data]
    return json_response(
        ChatCompletionMessageList(
            data=data,
            first_id=data[0].id if data else "",
            last_id=data[-1].id if data else "",
            has_more=page.has_more,
        )
    )
