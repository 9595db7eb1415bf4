"""Writes off the request path: a bounded queue that one task drains in batches.

A request hands its record over and moves on; the answer never waits for the database.
A batch that fails stays at the head of the queue and is retried with backoff, so a
database that goes away and comes back loses nothing that fit in the queue meanwhile;
what does not fit is dropped and counted. Until the schema is in place (a database
unreachable at start-up), the same task keeps trying to migrate it first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from oai_server.store.health import StoreHealth
from oai_server.store.interface import Record, Store
from oai_server.store.metrics import StoreMetrics

logger = logging.getLogger(__name__)

MAX_QUEUED = 10_000
BATCH = 128
IDLE_CHECK_S = 1.0
BACKOFF_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)


class StoreWriter:
    def __init__(
        self, store: Store, metrics: StoreMetrics, health: StoreHealth, *, migrated: bool
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.health = health
        self.migrated = migrated
        self._queue: deque[Record] = deque()
        self._wakeup = asyncio.Event()
        self._progress = asyncio.Condition()
        self._submitted = 0
        self._processed = 0
        self._failures = 0

    def __len__(self) -> int:
        return len(self._queue)

    def submit(self, record: Record) -> None:
        """Queue `record` for writing; never blocks, never raises."""
        if len(self._queue) >= MAX_QUEUED:
            self.metrics.dropped.labels("queue_full").inc()
            logger.warning("store queue full: %s not stored", record.object.id)
            return
        self._queue.append(record)
        self._submitted += 1
        self._wakeup.set()

    async def settled(self, wait_s: float) -> None:
        """Wait (at most `wait_s`) until everything submitted so far is written or dropped."""
        target = self._submitted
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s), self._progress:
                await self._progress.wait_for(lambda: self._processed >= target)

    async def run(self) -> None:
        while True:
            if not self.migrated:
                await self._attempt(self._migrate())
                continue
            if not self._queue:
                await self._idle()
                continue
            batch = [self._queue[i] for i in range(min(BATCH, len(self._queue)))]
            if await self._attempt(self.store.put(batch)):
                for _ in batch:
                    self._queue.popleft()
                self.metrics.written.inc(len(batch))
                await self._advance(len(batch))

    async def _migrate(self) -> None:
        await self.store.migrate()
        self.migrated = True

    async def _idle(self) -> None:
        self._wakeup.clear()
        try:
            async with asyncio.timeout(IDLE_CHECK_S):
                await self._wakeup.wait()
        except TimeoutError:
            if not self.health.ok:
                # Nothing to write: ask the database directly whether it is back.
                await self._attempt(self.store.ping())

    async def _attempt(self, work: object) -> bool:
        """Await `work`; on failure log, count and back off. True if it succeeded."""
        assert asyncio.iscoroutine(work)
        try:
            await work
        except Exception as exc:  # noqa: BLE001 - any database failure: retry later
            self.metrics.write_errors.inc()
            if self.health.ok or self._failures % 50 == 0:
                logger.warning("store write failed (%d queued, will retry): %r", len(self), exc)
            self.health.fail(exc)
            self.metrics.healthy.set(0)
            await asyncio.sleep(BACKOFF_S[min(self._failures, len(BACKOFF_S) - 1)])
            self._failures += 1
            return False
        if not self.health.ok:
            logger.info("store is back; %d queued records to write", len(self))
        self._failures = 0
        self.health.recover()
        self.metrics.healthy.set(1)
        return True

    async def _advance(self, count: int) -> None:
        async with self._progress:
            self._processed += count
            self._progress.notify_all()

    async def drain(self, wait_s: float) -> None:
        """At shutdown: give the queue `wait_s` to empty; count what is left as dropped."""
        await self.settled(wait_s)
        if self._queue:
            self.metrics.dropped.labels("shutdown").inc(len(self._queue))
            logger.warning("server stopping: %d records not stored", len(self._queue))
            self._queue.clear()
