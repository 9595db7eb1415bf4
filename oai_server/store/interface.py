"""The store's interface: what chat completions (and later responses) ask of a database.

Everything is one of two shapes, whatever the API it came from:

- a `StoredObject` (a chat completion; later a response or a conversation) of some `kind`,
  owned by one principal, with a wire `body`, `metadata`, and a place in time;
- its ordered `StoredItem`s (a completion's request messages; later a response's input
  and output items, a conversation's items), in `section`s.

Owners: `""` is "no API keys configured". A reader only ever sees its own owner's objects,
so every method takes the owner and answers as if other owners' objects did not exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

T = TypeVar("T")

Order = Literal["asc", "desc"]


class CursorNotFoundError(LookupError):
    """A list's `after` names nothing this owner can see: no such `what` in the list."""

    def __init__(self, cursor: str, what: str) -> None:
        super().__init__(cursor)
        self.what = what


@dataclass(frozen=True)
class StoredItem:
    id: str
    kind: str  # "message"; later "function_call", "function_call_output", ...
    body: dict[str, Any]
    section: str = "input"  # "input"; later "output" (responses), "conversation"


@dataclass(frozen=True)
class StoredObject:
    id: str
    kind: str  # "chat.completion"; later "response", "conversation"
    owner: str
    created_at: int  # microseconds since the epoch: the sort key
    body: dict[str, Any]
    model: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    request: dict[str, Any] | None = None
    status: str | None = None
    parent_id: str | None = None  # later: previous_response_id, conversation
    replica: str | None = None  # the Ray Serve replica that served it (its prefix cache)


@dataclass(frozen=True)
class Record:
    """One object and its items, written together or not at all."""

    object: StoredObject
    items: Sequence[StoredItem] = ()


@dataclass(frozen=True)
class ListQuery:
    after: str | None = None
    limit: int = 20
    order: Order = "asc"
    model: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    section: str | None = None  # items only: one section, or all


@dataclass(frozen=True)
class Page(Generic[T]):
    data: list[T]
    has_more: bool


class Store(Protocol):
    """A database of stored objects; every method is a coroutine that never blocks the loop."""

    async def migrate(self) -> None:
        """Create or upgrade the schema to the newest revision; then carry what configured
        API keys own under their former ids over to their ids now."""

    async def ping(self) -> None:
        """Raise unless the database answers."""

    async def put(self, records: Sequence[Record]) -> None:
        """Insert `records` in one transaction; an id already stored is left as it is."""

    async def get(self, kind: str, object_id: str, owner: str) -> StoredObject | None: ...

    async def list(self, kind: str, owner: str, query: ListQuery) -> Page[StoredObject]:
        """Objects in (created_at, id) order; raises `CursorNotFoundError` for a bad `after`."""

    async def update(
        self,
        kind: str,
        object_id: str,
        owner: str,
        *,
        metadata: Mapping[str, str] | None = None,
        body: dict[str, Any] | None = None,
        status: str | None = None,
    ) -> StoredObject | None:
        """Replace what is given; None if there is no such object."""

    async def delete(self, kind: str, object_id: str, owner: str) -> bool:
        """Delete an object with its items; False if there was none."""

    async def list_items(
        self, kind: str, parent_id: str, owner: str, query: ListQuery
    ) -> Page[StoredItem] | None:
        """An object's items in position order; None if there is no such object."""

    async def append_items(
        self,
        kind: str,
        parent_id: str,
        owner: str,
        items: Sequence[StoredItem],
        *,
        replica: str | None = None,
    ) -> bool:
        """Add items after the last one (a conversation growing); False if no such object.

        `replica`, when given, becomes the object's: the replica that served this turn."""

    async def lineage_items(
        self, kind: str, object_id: str, owner: str
    ) -> Sequence[StoredItem] | None:
        """The items of an object and of its ancestors (following `parent_id` within the
        owner's objects of `kind`), oldest ancestor first; None if there is no such object."""

    async def get_item(
        self, kind: str, parent_id: str, owner: str, item_id: str
    ) -> StoredItem | None:
        """One item of an object; None if there is no such object or item."""

    async def delete_item(self, kind: str, parent_id: str, owner: str, item_id: str) -> bool:
        """Remove one item (a conversation's); False if there is no such object or item."""

    async def replica_of(self, object_id: str) -> str | None:
        """The replica recorded for an object of any kind and owner (routing only)."""

    async def delete_before(self, created_at: int) -> int:
        """Delete every object created before `created_at` (retention); how many went."""

    async def close(self) -> None: ...
