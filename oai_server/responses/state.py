"""Responses and conversations on the store: what a response remembers, and from where.

A stored response is one object (kind `response`, its wire body, `parent_id` its
`previous_response_id`) with its input items (section `input`) and output items
(section `output`). Its context is rebuilt by walking `parent_id` back: every earlier
response's input then output, oldest first, function calls and their outputs
included. Instructions are not part of it: as the spec says, a previous response's
instructions are not carried over. A conversation is one object (kind `conversation`)
whose items grow as responses in it add their input and output.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from oai_server.errors import NotFoundError
from oai_server.responses.items import ITEM
from oai_server.store.interface import ListQuery, Record, StoredItem, StoredObject
from oai_server.store.service import StoreService
from schemas.response_items import Item
from schemas.responses import Response

RESPONSE = "response"
CONVERSATION = "conversation"
ALL = 1_000_000_000  # an item list's limit that takes every item


def now_us() -> int:
    return time.time_ns() // 1000


def stored_item(item: Item, section: str) -> StoredItem:
    return StoredItem(id=item.id, kind=item.type, body=json.loads(item.to_json()), section=section)


def wire_item(item: StoredItem) -> Item:
    return ITEM.validate_python(item.body)


def response_record(
    response: Response,
    inputs: Sequence[Item],
    owner: str,
    created_at: int,
    replica: str | None = None,
) -> Record:
    obj = StoredObject(
        id=response.id,
        kind=RESPONSE,
        owner=owner,
        created_at=created_at,
        body=json.loads(response.to_json()),
        model=response.model,
        metadata=dict(response.metadata),
        status=response.status,
        parent_id=response.previous_response_id,
        replica=replica,
    )
    items = [stored_item(i, "input") for i in inputs]
    items += [stored_item(i, "output") for i in response.output]
    return Record(obj, items)


def response_not_found(response_id: str, param: str = "response_id") -> NotFoundError:
    return NotFoundError(f"No response found with id '{response_id}'.", param=param)


def conversation_not_found(conversation_id: str, param: str = "conversation_id") -> NotFoundError:
    return NotFoundError(f"No conversation found with id '{conversation_id}'.", param=param)


@dataclass
class ResponseState:
    """The store, as the Responses API reads and writes it for one owner."""

    store: StoreService
    owner: str
    # The Ray Serve replica answering (None outside Ray): recorded with each response and
    # conversation turn, so the affinity gateway sends the next turn back to its cache.
    replica: str | None = None

    async def previous_context(self, response_id: str) -> list[Item]:
        """Every item before and of `response_id`, oldest first; 404 if it is not stored.

        An earlier turn that was deleted ends the chain: the context starts after it.
        """
        found = await self.store.lineage_or_404(
            RESPONSE,
            response_id,
            self.owner,
            response_not_found(response_id, "previous_response_id"),
        )
        return [wire_item(i) for i in found]

    async def file_content(self, file_id: str) -> bytes | None:
        """An uploaded file of this owner's (an image a request names by `file_id`)."""
        return await self.store.file_content(file_id, self.owner)

    async def conversation_items(self, conversation_id: str) -> list[Item]:
        page = await self.store.items_or_404(
            CONVERSATION,
            conversation_id,
            self.owner,
            ListQuery(limit=ALL),
            conversation_not_found(conversation_id, "conversation"),
        )
        return [wire_item(i) for i in page.data]

    async def extend_conversation(self, conversation_id: str, items: Sequence[Item]) -> None:
        async with self.store.reading():
            await self.store.store.append_items(
                CONVERSATION,
                conversation_id,
                self.owner,
                [stored_item(i, CONVERSATION) for i in items],
                replica=self.replica,
            )

    async def queue(self, response: Response, inputs: Sequence[Item], created_at: int) -> None:
        """Store a background response now, so it can be polled from its first moment."""
        record = response_record(response, inputs, self.owner, created_at, self.replica)
        await self.store.put_now([record])

    async def finish(self, response: Response) -> None:
        """Bring a stored background response up to date: its body, status and output."""
        outputs = [stored_item(i, "output") for i in response.output]
        async with self.store.reading():
            await self.store.store.update(
                RESPONSE,
                response.id,
                self.owner,
                body=json.loads(response.to_json()),
                status=response.status,
            )
            if outputs:
                await self.store.store.append_items(RESPONSE, response.id, self.owner, outputs)

    def record(self, response: Response, inputs: Sequence[Item], created_at: int) -> None:
        """Queue a finished response for storing; returns at once."""
        record = response_record(response, inputs, self.owner, created_at, self.replica)
        self.store.submit(record)
