"""The store as the app uses it: migrations at start-up, queued writes, guarded reads, retention."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import HTTPConnection

from oai_server.caller import caller
from oai_server.errors import NotFoundError, StoreUnavailableError
from oai_server.observability.spans import span
from oai_server.resilience import Breaker, DependencyDownError, abandoned_unwound
from oai_server.services.chat import ChatService
from oai_server.store.chat_records import completion_record
from oai_server.store.files import file_content
from oai_server.store.guarded import PROBE_S, GuardedStore, is_failure
from oai_server.store.health import StoreHealth
from oai_server.store.hook import RecordingChat
from oai_server.store.interface import (
    CursorNotFoundError,
    ListQuery,
    Page,
    Record,
    Store,
    StoredItem,
    StoredObject,
)
from oai_server.store.metrics import StoreMetrics
from oai_server.store.params import bad_cursor
from oai_server.store.writer import StoreWriter
from schemas.chat import CreateChatCompletionRequest, CreateChatCompletionResponse

logger = logging.getLogger(__name__)
T = TypeVar("T")

# How long a read waits for this replica's own queued writes (read-your-writes).
SETTLE_TIMEOUT_S = 2.0
DRAIN_TIMEOUT_S = 5.0
# At shutdown, how long the calls given up on at their deadline may take to unwind before
# the pool closes (a hung database never lets them: then their connections are dropped).
UNWIND_TIMEOUT_S = 0.5
RETENTION_INTERVAL_S = 3600.0
DAY_US = 86_400 * 1_000_000


def store_breaker(store: Store) -> Breaker:
    """A breaker for `store` on its own (the app gets its breakers from `Dependencies`)."""
    return Breaker("store", store.ping, probe_timeout=PROBE_S, is_failure=is_failure)


def owner_of(connection: HTTPConnection) -> str:
    """Whose stored objects this request sees: its caller's, or "" (everyone's) without keys."""
    return caller(connection.scope) or ""


class StoreService:
    """The store the app uses: every call within a deadline, through `breaker`."""

    def __init__(
        self,
        store: Store,
        metrics: StoreMetrics,
        breaker: Breaker | None = None,
        *,
        store_all: bool = False,
        retention_days: float | None = None,
        database: AsyncEngine | None = None,
    ) -> None:
        """`database`: the SQL database `store` is on, for the features that keep their own
        tables beside the store's (the Batch API's files); None when `store` is no SQL one."""
        self.breaker = breaker or store_breaker(store)
        self.store = GuardedStore(store, self.breaker)
        self.metrics = metrics
        self.store_all = store_all
        self.retention_days = retention_days
        self.database = database
        self.writer = StoreWriter(self.store, metrics, self.breaker, migrated=False)
        self.health = StoreHealth(self.breaker, self.writer.oldest_queued)
        metrics.queue_depth.set_function(lambda: float(len(self.writer)))
        metrics.healthy.set_function(lambda: float(self.health.ok))
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Migrate the schema, then start writing; a database down now is retried later."""
        try:
            await self.store.migrate()
            self.writer.migrated = True
        except Exception as exc:  # noqa: BLE001 - the server serves answers without its store
            logger.warning("store unavailable at start-up (will retry): %r", exc)
            if self.breaker.up:
                self.breaker.failed(exc, at_once=True)  # down until the probe answers
        self._tasks = [asyncio.create_task(self.writer.run())]
        if self.retention_days is not None:
            self._tasks.append(asyncio.create_task(self._retain()))

    async def stop(self) -> None:
        await self.writer.drain(DRAIN_TIMEOUT_S)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.breaker.close()
        await abandoned_unwound(UNWIND_TIMEOUT_S)
        await self.store.close()

    async def file_content(self, file_id: str, owner: str) -> bytes | None:
        """The bytes of the uploaded file `file_id` of `owner`; None if there is none (or
        the store is on no SQL database, where no file can have been uploaded)."""
        if self.database is None:
            return None
        async with self.reading():
            return await file_content(self.database, file_id, owner)

    def wants(self, req: CreateChatCompletionRequest) -> bool:
        return bool(req.store) or self.store_all

    def recording(
        self, connection: HTTPConnection, req: CreateChatCompletionRequest, service: ChatService
    ) -> RecordingChat | None:
        """`service`, wrapped to store its answers, if `req` is to be stored; else None."""
        if not self.wants(req):
            return None
        return RecordingChat(service, self, owner_of(connection))

    def record(
        self,
        req: CreateChatCompletionRequest,
        response: CreateChatCompletionResponse,
        owner: str | None,
    ) -> None:
        """Queue a finished chat completion for storing; returns at once."""
        self.submit(completion_record(req, response, owner or ""))

    def submit(self, record: Record) -> None:
        """Queue `record` for storing; returns at once (the writer writes in batches)."""
        with span("store.write", {"oai.store.kind": record.object.kind}):
            self.writer.submit(record)

    def incomplete(self) -> None:
        """Count an answer to be stored that did not finish (`oai_store_incomplete_total`)."""
        self.metrics.incomplete.inc()

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """Read after this replica's pending writes; a bad list cursor becomes a 400, a
        database that fails, hangs or is marked down a 503 with `Retry-After`, within the
        read deadline (each store call in the block has one)."""
        if not self.breaker.up:
            raise self._unavailable()
        if self.health.ok:
            # A store that keeps up settles at once; a stalled one would only use up
            # the read's deadline waiting for writes that are not leaving the queue.
            await self.writer.settled(SETTLE_TIMEOUT_S)
        try:
            yield
        except CursorNotFoundError as exc:
            raise bad_cursor(exc) from None
        except DependencyDownError:
            raise self._unavailable() from None
        except Exception as exc:
            if not is_failure(exc):
                raise
            self.metrics.read_errors.inc()
            logger.warning("store read failed: %r", exc)
            raise self._unavailable() from None

    def _unavailable(self) -> StoreUnavailableError:
        wait = str(math.ceil(self.breaker.retry_after_s))
        return StoreUnavailableError(
            "Stored objects are unavailable right now; the answer itself is not affected. "
            "Try again shortly.",
            headers={"Retry-After": wait},
        )

    async def found(self, read: Callable[[], Awaitable[T | None]], missing: NotFoundError) -> T:
        """What `read` finds (as `reading` reads it); `missing` (a 404) when it finds nothing:
        None, or False from a delete."""
        async with self.reading():
            result = await read()
        if result is None or result is False:
            raise missing
        return result

    # Each read or change of one object as a route makes it: within `reading`, and a 404
    # (`missing`) when there is no such object (of this owner) or item.

    async def get_or_404(
        self, kind: str, object_id: str, owner: str, missing: NotFoundError
    ) -> StoredObject:
        return await self.found(lambda: self.store.get(kind, object_id, owner), missing)

    async def update_or_404(
        self,
        kind: str,
        object_id: str,
        owner: str,
        missing: NotFoundError,
        *,
        metadata: Mapping[str, str],
    ) -> StoredObject:
        return await self.found(
            lambda: self.store.update(kind, object_id, owner, metadata=metadata), missing
        )

    async def delete_or_404(
        self, kind: str, object_id: str, owner: str, missing: NotFoundError
    ) -> None:
        await self.found(lambda: self.store.delete(kind, object_id, owner), missing)

    async def items_or_404(
        self, kind: str, parent_id: str, owner: str, query: ListQuery, missing: NotFoundError
    ) -> Page[StoredItem]:
        return await self.found(
            lambda: self.store.list_items(kind, parent_id, owner, query), missing
        )

    async def lineage_or_404(
        self, kind: str, object_id: str, owner: str, missing: NotFoundError
    ) -> Sequence[StoredItem]:
        return await self.found(lambda: self.store.lineage_items(kind, object_id, owner), missing)

    async def append_or_404(
        self,
        kind: str,
        parent_id: str,
        owner: str,
        items: Sequence[StoredItem],
        missing: NotFoundError,
    ) -> None:
        await self.found(lambda: self.store.append_items(kind, parent_id, owner, items), missing)

    async def item_or_404(
        self, kind: str, parent_id: str, owner: str, item_id: str, missing: NotFoundError
    ) -> StoredItem:
        return await self.found(
            lambda: self.store.get_item(kind, parent_id, owner, item_id), missing
        )

    async def delete_item_or_404(
        self, kind: str, parent_id: str, owner: str, item_id: str, missing: NotFoundError
    ) -> StoredObject:
        """Remove one item of an object; the object as it is after."""
        async with self.reading():
            deleted = await self.store.delete_item(kind, parent_id, owner, item_id)
            obj = await self.store.get(kind, parent_id, owner)
        if not deleted or obj is None:
            raise missing
        return obj

    async def list(self, kind: str, owner: str, query: ListQuery) -> Page[StoredObject]:
        """One page of the owner's objects of `kind`, as `reading` reads it."""
        async with self.reading():
            return await self.store.list(kind, owner, query)

    async def put_now(self, records: Sequence[Record]) -> None:
        """Store `records` before returning (not queued: the caller answers with them)."""
        async with self.reading():
            await self.store.put(records)

    async def purge_expired(self) -> int:
        """Delete what is older than the retention period; how many went."""
        if self.retention_days is None:
            return 0
        cutoff = time.time_ns() // 1000 - int(self.retention_days * DAY_US)
        gone = await self.store.delete_before(cutoff)
        self.metrics.expired.inc(gone)
        if gone:
            logger.info("retention: deleted %d stored objects", gone)
        return gone

    async def _retain(self) -> None:
        while True:
            try:
                await self.purge_expired()
            except Exception as exc:  # noqa: BLE001 - try again next round
                logger.warning("retention pass failed: %r", exc)
            await asyncio.sleep(RETENTION_INTERVAL_S)
