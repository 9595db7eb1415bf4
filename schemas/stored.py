"""Stored chat completions (`store: true`): list, retrieve, update, delete, messages."""

from __future__ import annotations

from typing import Any, Literal

from schemas.chat import CreateChatCompletionResponse, MessageToolCall
from schemas.common import Metadata, RequestModel, ResponseModel


class StoredChatCompletion(CreateChatCompletionResponse):
    """A chat completion as retrieved: the answer as sent, with its current `metadata`."""

    metadata: Metadata = None


class ChatCompletionList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[StoredChatCompletion]
    first_id: str
    last_id: str
    has_more: bool


class ChatCompletionDeleted(ResponseModel):
    object: Literal["chat.completion.deleted"] = "chat.completion.deleted"
    id: str
    deleted: bool


class ChatCompletionStoreMessage(ResponseModel):
    """A message of a stored completion's request, as OpenAI lists them.

    The spec types these as assistant messages, but its own example and OpenAI's API
    list the request's messages with their roles (`user`, `system`, ...): so does this.
    `content` is the text; `content_parts` the parts, when the message was sent in parts.
    """

    id: str
    role: str
    content: str | None
    refusal: str | None
    name: str | None = None
    content_parts: list[dict[str, Any]] | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None


class ChatCompletionMessageList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[ChatCompletionStoreMessage]
    first_id: str
    last_id: str
    has_more: bool


class UpdateChatCompletionRequest(RequestModel):
    """`POST /v1/chat/completions/{completion_id}`: only `metadata` can change."""

    metadata: Metadata
