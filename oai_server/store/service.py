"""The store as the app uses it: migrations at start-up, queued writes, guarded reads, retention."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from starlette.requests import HTTPConnection

from oai_server.auth.caller import caller
from oai_server.errors import NotFoundError, StoreUnavailableError
from oai_server.services.chat import ChatService
from oai_server.store.chat_records import completion_record
from oai_server.store.health import StoreHealth
from oai_server.store.hook import RecordingChat
from oai_server.store.interface import CursorNotFoundError, Store
from oai_server.store.metrics import StoreMetrics
from oai_server.store.params import bad_cursor
from oai_server.store.writer import StoreWriter
from schemas.chat import CreateChatCompletionRequest, CreateChatCompletionResponse

logger = logging.getLogger(__name__)
T = TypeVar("T")

MIGRATE_TIMEOUT_S = 15.0
# How long a read waits for this replica's own queued writes (read-your-writes).
SETTLE_TIMEOUT_S = 2.0
DRAIN_TIMEOUT_S = 5.0
RETENTION_INTERVAL_S = 3600.0
DAY_US = 86_400 * 1_000_000


def owner_of(connection: HTTPConnection) -> str:
    """Whose stored objects this request sees: its caller's, or "" (everyone's) without keys."""
    return caller(connection.scope) or ""


class StoreService:
    def __init__(
        self,
        store: Store,
        metrics: StoreMetrics,
        health: StoreHealth,
        *,
        store_all: bool = False,
        retention_days: float | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.health = health
        self.store_all = store_all
        self.retention_days = retention_days
        self.writer = StoreWriter(store, metrics, health, migrated=False)
        metrics.queue_depth.set_function(lambda: float(len(self.writer)))
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Migrate the schema, then start writing; a database down now is retried later."""
        try:
            async with asyncio.timeout(MIGRATE_TIMEOUT_S):
                await self.store.migrate()
            self.writer.migrated = True
        except Exception as exc:  # noqa: BLE001 - the server serves answers without its store
            logger.warning("store unavailable at start-up (will retry): %r", exc)
            self.health.fail(exc)
            self.metrics.healthy.set(0)
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
        await self.store.close()

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
        self.writer.submit(completion_record(req, response, owner or ""))

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """Read after this replica's pending writes; a bad list cursor becomes a 400, a
        database failure a 503."""
        await self.writer.settled(SETTLE_TIMEOUT_S)
        try:
            yield
        except CursorNotFoundError as exc:
            raise bad_cursor(exc) from None
        except Exception as exc:
            if isinstance(exc, LookupError) or getattr(exc, "status_code", 500) < 500:
                raise
            self.metrics.read_errors.inc()
            self.health.fail(exc)
            self.metrics.healthy.set(0)
            logger.warning("store read failed: %r", exc)
            raise StoreUnavailableError(
                "Stored objects are unavailable right now; the answer itself is not affected. "
                "Try again shortly."
            ) from None

    async def found(self, read: Callable[[], Awaitable[T | None]], missing: NotFoundError) -> T:
        """What `read` finds (as `reading` reads it); `missing` (a 404) when it finds nothing:
        None, or False from a delete."""
        async with self.reading():
            result = await read()
        if result is None or result is False:
            raise missing
        return result

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
