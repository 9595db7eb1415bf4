"""Stored chat completions: `GET /v1/chat/completions`, `GET|POST|DELETE .../{completion_id}`,
`GET .../{completion_id}/messages`. Each reads or changes only the caller's own objects."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.errors import NotFoundError
from oai_server.http.answer import json_response
from oai_server.http.parsing import parse_body
from oai_server.services.metadata import check_metadata
from oai_server.settings import Settings
from oai_server.store.chat_records import KIND, store_message, stored_completion
from oai_server.store.params import list_object, list_query
from oai_server.store.service import StoreService, owner_of
from schemas.stored import (
    ChatCompletionDeleted,
    ChatCompletionList,
    ChatCompletionMessageList,
    UpdateChatCompletionRequest,
)


def _not_found(completion_id: str) -> NotFoundError:
    return NotFoundError(
        f"No stored chat completion found with id '{completion_id}'.", param="completion_id"
    )


def router(settings: Settings, store: StoreService) -> APIRouter:
    """The routes, on `store`."""
    router = APIRouter()

    @router.get("/v1/chat/completions")
    async def list_chat_completions(request: Request) -> Response:
        query = list_query(request.query_params, filters=True)
        page = await store.list(KIND, owner_of(request), query)
        data = [stored_completion(obj) for obj in page.data]
        return json_response(list_object(ChatCompletionList, data, page.has_more))

    @router.get("/v1/chat/completions/{completion_id}")
    async def retrieve_chat_completion(completion_id: str, request: Request) -> Response:
        obj = await store.get_or_404(
            KIND, completion_id, owner_of(request), _not_found(completion_id)
        )
        return json_response(stored_completion(obj))

    @router.post("/v1/chat/completions/{completion_id}")
    async def update_chat_completion(completion_id: str, request: Request) -> Response:
        body = await parse_body(request, UpdateChatCompletionRequest, settings.max_request_bytes)
        check_metadata(body.metadata)
        obj = await store.update_or_404(
            KIND,
            completion_id,
            owner_of(request),
            _not_found(completion_id),
            metadata=body.metadata or {},
        )
        return json_response(stored_completion(obj))

    @router.delete("/v1/chat/completions/{completion_id}")
    async def delete_chat_completion(completion_id: str, request: Request) -> Response:
        await store.delete_or_404(KIND, completion_id, owner_of(request), _not_found(completion_id))
        return json_response(ChatCompletionDeleted(id=completion_id, deleted=True))

    @router.get("/v1/chat/completions/{completion_id}/messages")
    async def list_chat_completion_messages(completion_id: str, request: Request) -> Response:
        query = list_query(request.query_params, filters=False)
        page = await store.items_or_404(
            KIND, completion_id, owner_of(request), query, _not_found(completion_id)
        )
        data = [store_message(item) for item in page.data]
        return json_response(list_object(ChatCompletionMessageList, data, page.has_more))

    return router
