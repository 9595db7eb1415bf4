"""A Realtime session's conversation: its items, in order, and the chat they make.

Items live on the server for the life of the connection. Each response sees all of them
through the model's chat template: the conversation is turned into the messages of a
chat completion request (`oai_server.items.context`, as for the Responses API), so the
Realtime socket and `/v1/chat/completions` share one path.
"""

from __future__ import annotations

from oai_server.errors import InvalidRequestError, NotFoundError
from oai_server.items.context import Call, CallOutput, ContextItem, Said, oldest_to_drop
from schemas.realtime import ContentPart, FunctionCallItem, FunctionCallOutputItem, MessageItem

Item = MessageItem | FunctionCallItem | FunctionCallOutputItem

_TEXT_PARTS = frozenset({"input_text", "output_text"})


def check_text_only(item: Item, param: str = "item") -> None:
    """Refuse audio: this server takes text, and images (`input_image` parts with an
    `image_url`) in user messages, which the model's engine refuses if it takes none."""
    if isinstance(item, MessageItem):
        for i, part in enumerate(item.content):
            image = part.type == "input_image" and part.image_url and item.role == "user"
            if not image and (part.type not in _TEXT_PARTS or part.text is None):
                raise InvalidRequestError(
                    f"Content of type '{part.type}' is not supported: this server takes "
                    "'input_text' parts (with 'text') and, in user messages, 'input_image' "
                    "parts (with 'image_url').",
                    param=f"{param}.content[{i}]",
                    code="unsupported_content_type",
                )


def _text(parts: list[ContentPart]) -> str:
    return "".join(p.text or "" for p in parts)


class Conversation:
    """The items of one session, in order, addressable by id."""

    def __init__(self) -> None:
        self._items: list[Item] = []

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[Item]:
        return list(self._items)

    def last_id(self) -> str | None:
        return self._items[-1].id if self._items else None

    def add(self, item: Item, previous_item_id: str | None = None) -> str | None:
        """Insert `item` after `previous_item_id` (at the end by default); return the id
        of the item now before it."""
        if previous_item_id is None:
            before = self.last_id()
            self._items.append(item)
            return before
        at = self._index(previous_item_id, "previous_item_id")
        self._items.insert(at + 1, item)
        return previous_item_id

    def get(self, item_id: str) -> Item:
        return self._items[self._index(item_id, "item_id")]

    def delete(self, item_id: str) -> None:
        del self._items[self._index(item_id, "item_id")]

    def _index(self, item_id: str, param: str) -> int:
        for i, item in enumerate(self._items):
            if item.id == item_id:
                return i
        raise NotFoundError(f"Item with item_id '{item_id}' not found.", param=param)

    def context(self) -> list[ContextItem]:
        """The items as the chat's context sees them."""
        return [_context_item(item) for item in self._items]

    def make_room(self) -> list[Item]:
        """Drop the oldest items to make room, as `oldest_to_drop` says; return them."""
        count = oldest_to_drop(self.context())
        dropped, self._items = self._items[:count], self._items[count:]
        return dropped


def _context_item(item: Item) -> ContextItem:
    if isinstance(item, MessageItem):
        images = tuple(p.image_url for p in item.content if p.type == "input_image" and p.image_url)
        return Said(item.role, _text(item.content), images)
    if isinstance(item, FunctionCallItem):
        return Call(item.call_id or item.id or "", item.name, item.arguments)
    return CallOutput(item.call_id, item.output)
