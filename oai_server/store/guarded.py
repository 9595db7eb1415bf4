"""The store behind its breaker: a deadline on every call, and none at all while it is down.

Reads, and the writes a request waits for (updates, deletes, a conversation's new items),
get `READ_S`: they sit on the request path, and a client would rather have a 503 with
`Retry-After` than a hung request. Queued writes get `WRITE_S`; migrations and retention
passes, which may touch every row, longer.
While the breaker marks the database down every call raises `DependencyDownError` at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from oai_server.resilience import Breaker
from oai_server.store.interface import ListQuery, Page, Record, Store, StoredItem, StoredObject

T = TypeVar("T")

READ_S = 1.5
WRITE_S = 10.0  # off the request path; a stall shows sooner as a stale queue
# The schema, then API keys' former ids carried over (`owners`): a walk of every owner row,
# in statements each within the driver's own deadline.
MIGRATE_S = 120.0
RETENTION_S = 60.0  # one pass deleting a day's worth of old objects
PROBE_S = 1.0


def is_failure(exc: BaseException) -> bool:
    """Whether `exc` says the database failed, rather than the request (a bad cursor)."""
    return not isinstance(exc, LookupError) and getattr(exc, "status_code", 500) >= 500


class GuardedStore:
    """`Store` on `inner`, each call through `breaker` within its deadline."""

    def __init__(self, inner: Store, breaker: Breaker) -> None:
        self.inner = inner
        self.breaker = breaker

    def _read(self, work: Awaitable[T]) -> Awaitable[T]:
        return self.breaker.call(work, READ_S)

    async def migrate(self) -> None:
        await self.breaker.call(self.inner.migrate(), MIGRATE_S)

    async def ping(self) -> None:
        await self.breaker.call(self.inner.ping(), PROBE_S)

    async def put(self, records: Sequence[Record]) -> None:
        await self.breaker.call(self.inner.put(records), WRITE_S)

    async def get(self, kind: str, object_id: str, owner: str) -> StoredObject | None:
        return await self._read(self.inner.get(kind, object_id, owner))

    async def list(self, kind: str, owner: str, query: ListQuery) -> Page[StoredObject]:
        return await self._read(self.inner.list(kind, owner, query))

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
        work = self.inner.update(
            kind, object_id, owner, metadata=metadata, body=body, status=status
        )
        return await self._read(work)

    async def delete(self, kind: str, object_id: str, owner: str) -> bool:
        return await self._read(self.inner.delete(kind, object_id, owner))

    async def list_items(
        self, kind: str, parent_id: str, owner: str, query: ListQuery
    ) -> Page[StoredItem] | None:
        return await self._read(self.inner.list_items(kind, parent_id, owner, query))

    async def append_items(
        self,
        kind: str,
        parent_id: str,
        owner: str,
        items: Sequence[StoredItem],
        *,
        replica: str | None = None,
    ) -> bool:
        work = self.inner.append_items(kind, parent_id, owner, items, replica=replica)
        return await self._read(work)

    async def lineage_items(
        self, kind: str, object_id: str, owner: str
    ) -> Sequence[StoredItem] | None:
        return await self._read(self.inner.lineage_items(kind, object_id, owner))

    async def get_item(
        self, kind: str, parent_id: str, owner: str, item_id: str
    ) -> StoredItem | None:
        return await self._read(self.inner.get_item(kind, parent_id, owner, item_id))

    async def delete_item(self, kind: str, parent_id: str, owner: str, item_id: str) -> bool:
        return await self._read(self.inner.delete_item(kind, parent_id, owner, item_id))

    async def replica_of(self, object_id: str) -> str | None:
        return await self._read(self.inner.replica_of(object_id))

    async def delete_before(self, created_at: int) -> int:
        return await self.breaker.call(self.inner.delete_before(created_at), RETENTION_S)

    async def close(self) -> None:
        await self.inner.close()
