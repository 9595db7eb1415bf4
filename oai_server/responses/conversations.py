"""`/v1/conversations`: create, retrieve, update, delete; list, add, retrieve, delete items.

A conversation is a stored object (kind `conversation`) whose items are the turns of
every response created in it, and whatever the client added. The caller's own only.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request, Response

from oai_server.http.answer import json_response
from oai_server.http.parsing import parse_body
from oai_server.ids import new_id
from oai_server.responses.items import to_items
from oai_server.responses.routes import Kept, item_query
from oai_server.responses.state import (
    CONVERSATION,
    conversation_not_found,
    now_us,
    stored_item,
    wire_item,
)
from oai_server.secret import ServerSecret
from oai_server.services.metadata import check_metadata
from oai_server.settings import Settings
from oai_server.store.interface import Record, StoredObject
from oai_server.store.params import list_object
from schemas.conversations import (
    AddConversationItems,
    Conversation,
    ConversationDeleted,
    ConversationItemList,
    CreateConversation,
    UpdateConversation,
)


def _conversation(obj: StoredObject) -> Conversation:
    return Conversation(
        id=obj.id, created_at=obj.created_at // 1_000_000, metadata=dict(obj.metadata)
    )


def router(settings: Settings, secret: ServerSecret, kept: Kept) -> APIRouter:
    """The routes, on `kept`'s store (each a 400 on a server that keeps nothing); `secret`
    opens reasoning items added sealed."""
    router = APIRouter()
    limit = settings.max_request_bytes

    @router.post("/v1/conversations")
    async def create_conversation(request: Request) -> Response:
        body = await parse_body(request, CreateConversation, limit)
        check_metadata(body.metadata)
        state = kept.stored(request)
        items = to_items(body.items, secret)
        created = now_us()
        conversation_id = new_id("conv")
        obj = StoredObject(
            id=conversation_id,
            kind=CONVERSATION,
            owner=state.owner,
            created_at=created,
            body={"id": conversation_id, "created_at": created // 1_000_000},
            metadata=dict(body.metadata or {}),
        )
        await state.store.put_now([Record(obj, [stored_item(i, CONVERSATION) for i in items])])
        return json_response(_conversation(obj))

    @router.get("/v1/conversations/{conversation_id}")
    async def retrieve_conversation(conversation_id: str, request: Request) -> Response:
        state = kept.stored(request)
        obj = await state.store.get_or_404(
            CONVERSATION, conversation_id, state.owner, conversation_not_found(conversation_id)
        )
        return json_response(_conversation(obj))

    @router.post("/v1/conversations/{conversation_id}")
    async def update_conversation(conversation_id: str, request: Request) -> Response:
        body = await parse_body(request, UpdateConversation, limit)
        check_metadata(body.metadata)
        state = kept.stored(request)
        obj = await state.store.update_or_404(
            CONVERSATION,
            conversation_id,
            state.owner,
            conversation_not_found(conversation_id),
            metadata=body.metadata or {},
        )
        return json_response(_conversation(obj))

    @router.delete("/v1/conversations/{conversation_id}")
    async def delete_conversation(conversation_id: str, request: Request) -> Response:
        state = kept.stored(request)
        await state.store.delete_or_404(
            CONVERSATION, conversation_id, state.owner, conversation_not_found(conversation_id)
        )
        return json_response(ConversationDeleted(id=conversation_id, deleted=True))

    @router.get("/v1/conversations/{conversation_id}/items")
    async def list_conversation_items(conversation_id: str, request: Request) -> Response:
        state = kept.stored(request)
        page = await state.store.items_or_404(
            CONVERSATION,
            conversation_id,
            state.owner,
            item_query(request),
            conversation_not_found(conversation_id),
        )
        return json_response(
            list_object(ConversationItemList, [wire_item(i) for i in page.data], page.has_more)
        )

    @router.post("/v1/conversations/{conversation_id}/items")
    async def add_conversation_items(conversation_id: str, request: Request) -> Response:
        body = await parse_body(request, AddConversationItems, limit)
        state = kept.stored(request)
        items = to_items(body.items, secret)
        await state.store.append_or_404(
            CONVERSATION,
            conversation_id,
            state.owner,
            [stored_item(i, CONVERSATION) for i in items],
            conversation_not_found(conversation_id),
        )
        return json_response(list_object(ConversationItemList, items, False))

    @router.get("/v1/conversations/{conversation_id}/items/{item_id}")
    async def retrieve_conversation_item(
        conversation_id: str, item_id: str, request: Request
    ) -> Response:
        state = kept.stored(request)
        item = await state.store.item_or_404(
            CONVERSATION,
            conversation_id,
            state.owner,
            item_id,
            conversation_not_found(conversation_id),
        )
        return Response(json.dumps(item.body), media_type="application/json")

    @router.delete("/v1/conversations/{conversation_id}/items/{item_id}")
    async def delete_conversation_item(
        conversation_id: str, item_id: str, request: Request
    ) -> Response:
        state = kept.stored(request)
        obj = await state.store.delete_item_or_404(
            CONVERSATION,
            conversation_id,
            state.owner,
            item_id,
            conversation_not_found(conversation_id),
        )
        return json_response(_conversation(obj))

    return router
