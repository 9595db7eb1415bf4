"""Chat completions as store records, and stored records back as wire objects."""

from __future__ import annotations

import json
import time
from typing import Any

from oai_server.store.interface import Record, StoredItem, StoredObject
from schemas.chat import CreateChatCompletionRequest, CreateChatCompletionResponse
from schemas.stored import ChatCompletionStoreMessage, StoredChatCompletion

KIND = "chat.completion"


def completion_record(
    req: CreateChatCompletionRequest, response: CreateChatCompletionResponse, owner: str
) -> Record:
    """The record of one answered request: the answer as sent, the request's messages as items."""
    request = req.model_dump(mode="json", exclude={"messages"}, exclude_none=True)
    obj = StoredObject(
        id=response.id,
        kind=KIND,
        owner=owner,
        created_at=time.time_ns() // 1000,
        body=json.loads(response.to_json()),
        model=response.model,
        metadata=dict(req.metadata or {}),
        request=request,
    )
    messages = [
        StoredItem(
            id=f"{response.id}-{i}",
            kind="message",
            body=message.model_dump(mode="json", exclude_none=True),
        )
        for i, message in enumerate(req.messages)
    ]
    return Record(obj, messages)


def stored_completion(obj: StoredObject) -> StoredChatCompletion:
    return StoredChatCompletion.model_validate({**obj.body, "metadata": dict(obj.metadata)})


def _text(content: Any) -> tuple[str | None, list[dict[str, Any]] | None]:
    if content is None or isinstance(content, str):
        return content, None
    parts = [part for part in content if isinstance(part, dict)]
    text = "".join(str(part.get("text", "")) for part in parts if part.get("type") == "text")
    return text, parts


def store_message(item: StoredItem) -> ChatCompletionStoreMessage:
    body = item.body
    content, parts = _text(body.get("content"))
    extra = {key: body[key] for key in ("tool_calls", "tool_call_id") if body.get(key)}
    return ChatCompletionStoreMessage.model_validate(
        {
            "id": item.id,
            "role": str(body["role"]),
            "content": content,
            "refusal": body.get("refusal"),
            "name": body.get("name"),
            "content_parts": parts,
            **extra,
        }
    )
