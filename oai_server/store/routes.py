"""Stored chat completions: `GET /v1/chat/completions`, `GET|POST|DELETE .../{completion_id}`,
`GET .../{completion_id}/messages`. Each reads or changes only the caller's own objects."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.errors import InvalidRequestError, NotFoundError
from oai_server.http.answer import json_response
from oai_server.http.parsing import parse_body
from oai_server.services.metadata import check_metadata
from oai_server.state import server_state
from oai_server.store.chat_records import KIND, store_message, stored_completion
from oai_server.store.params import list_object, list_query
from oai_server.store.service import StoreService, owner_of
from schemas.stored import (
    ChatCompletionDeleted,
    ChatCompletionList,
    ChatCompletionMessageList,
    UpdateChatCompletionRequest,
)

router = APIRouter()


def store_service(request: Request) -> StoreService:
    """The app's store; a 400 on a server that keeps none."""
    store = server_state(request).store
    if store is None:
        raise InvalidRequestError("This server keeps no stored objects.")
    return store


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
    return json_response(list_object(ChatCompletionList, data, page.has_more))


@router.get("/v1/chat/completions/{completion_id}")
async def retrieve_chat_completion(completion_id: str, request: Request) -> Response:
    service = store_service(request)
    obj = await service.found(
        lambda: service.store.get(KIND, completion_id, owner_of(request)),
        _not_found(completion_id),
    )
    return json_response(stored_completion(obj))


@router.post("/v1/chat/completions/{completion_id}")
async def update_chat_completion(completion_id: str, request: Request) -> Response:
    settings = server_state(request).settings
    body = await parse_body(request, UpdateChatCompletionRequest, settings.max_request_bytes)
    check_metadata(body.metadata)
    service = store_service(request)
    obj = await service.found(
        lambda: service.store.update(
            KIND, completion_id, owner_of(request), metadata=body.metadata or {}
        ),
        _not_found(completion_id),
    )
    return json_response(stored_completion(obj))


@router.delete("/v1/chat/completions/{completion_id}")
async def delete_chat_completion(completion_id: str, request: Request) -> Response:
    service = store_service(request)
    await service.found(
        lambda: service.store.delete(KIND, completion_id, owner_of(request)),
        _not_found(completion_id),
    )
    return json_response(ChatCompletionDeleted(id=completion_id, deleted=True))


@router.get("/v1/chat/completions/{completion_id}/messages")
async def list_chat_completion_messages(completion_id: str, request: Request) -> Response:
    query = list_query(request.query_params, filters=False)
    service = store_service(request)
    page = await service.found(
        lambda: service.store.list_items(KIND, completion_id, owner_of(request), query),
        _not_found(completion_id),
    )
    data = [store_message(item) for item in page.data]
    return json_response(list_object(ChatCompletionMessageList, data, page.has_more))
