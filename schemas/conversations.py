"""`/v1/conversations`: conversations and their items, as OpenAI's spec has them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.common import Metadata, RequestModel, ResponseModel
from schemas.response_items import Item
from schemas.responses import InputItem


class CreateConversation(RequestModel):
    metadata: Metadata = None
    items: Annotated[list[InputItem], Field(max_length=20)] | None = None


class UpdateConversation(RequestModel):
    metadata: Metadata


class AddConversationItems(RequestModel):
    items: Annotated[list[InputItem], Field(max_length=20)]


class Conversation(ResponseModel):
    id: str
    object: Literal["conversation"] = "conversation"
    created_at: int
    metadata: dict[str, str]


class ConversationDeleted(ResponseModel):
    id: str
    object: Literal["conversation.deleted"] = "conversation.deleted"
    deleted: bool


class ConversationItemList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[Item]
    first_id: str
    last_id: str
    has_more: bool
