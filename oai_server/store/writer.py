"""Writes off the request path: a bounded queue that one task drains in batches.

A request hands its record over and moves on; the answer never waits for the database.
A batch that fails, or runs past its deadline, stays at the head of the queue and is
retried with backoff; while the database's breaker marks it down the writer waits for the
breaker's probe to find it back. So a database that goes away or hangs and comes back loses
nothing that fit in the queue meanwhile (what does not fit is dropped and counted), and
nothing is written twice: a batch is keyed by its objects' ids, and the store skips ids it
already holds (a batch given up on at its deadline may still have committed). Until the
schema is in place (a database unreachable at start-up), the same task keeps trying to
migrate it first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque

from oai_server.resilience import Breaker, DependencyDownError
from oai_server.store.interface import Record, Store
from oai_server.store.metrics import StoreMetrics

logger = logging.getLogger(__name__)

MAX_QUEUED = 10_000
BATCH = 128
BACKOFF_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)


class StoreWriter:
    def __init__(
        self, store: Store, metrics: StoreMetrics, breaker: Breaker, *, migrated: bool
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.breaker = breaker
        self.migrated = migrated
        # Each record with the time it was queued (monotonic), for the health check.
        self._queue: deque[tuple[float, Record]] = deque()
        self._wakeup = asyncio.Event()
        self._progress = asyncio.Condition()
        self._submitted = 0
        self._processed = 0
        self._failures = 0

    def __len__(self) -> int:
        return len(self._queue)

    def oldest_queued(self) -> float | None:
        """When the record waiting longest was queued (`time.monotonic()`); None if none."""
        return self._queue[0][0] if self._queue else None

    def submit(self, record: Record) -> None:
        """Queue `record` for writing; never blocks, never raises."""
        if len(self._queue) >= MAX_QUEUED:
            self.metrics.dropped.labels("queue_full").inc()
            logger.warning("store queue full: %s not stored", record.object.id)
            return
        self._queue.append((time.monotonic(), record))
        self._submitted += 1
        self._wakeup.set()

    async def settled(self, wait_s: float) -> None:
        """Wait (at most `wait_s`) until everything submitted so far is written or dropped,
        or until the store is marked down: then nothing leaves the queue before the probe
        finds it back, and a read waiting on it would only use up its caller's time."""
        target = self._submitted
        if self._processed >= target:
            return
        written = asyncio.ensure_future(self._written(target))
        down = asyncio.ensure_future(self.breaker.wait_down())
        try:
            await asyncio.wait((written, down), timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            written.cancel()
            down.cancel()

    async def _written(self, target: int) -> None:
        async with self._progress:
            await self._progress.wait_for(lambda: self._processed >= target)

    async def run(self) -> None:
        while True:
            if not self.breaker.up:
                await self.breaker.wait_up()
            if not self.migrated:
                await self._attempt(self._migrate())
                continue
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch = [self._queue[i][1] for i in range(min(BATCH, len(self._queue)))]
            if await self._attempt(self.store.put(batch)):
                for _ in batch:
                    self._queue.popleft()
                self.metrics.written.inc(len(batch))
                await self._advance(len(batch))

    async def _migrate(self) -> None:
        await self.store.migrate()
        self.migrated = True

    async def _attempt(self, work: object) -> bool:
        """Await `work`; on failure log, count and back off. True if it succeeded."""
        assert asyncio.iscoroutine(work)
        try:
            await work
        except DependencyDownError:
            return False  # marked down meanwhile: the loop waits for the probe
        except Exception as exc:  # noqa: BLE001 - any database failure: retry later
            self.metrics.write_errors.inc()
            if self._failures % 50 == 0:
                logger.warning("store write failed (%d queued, will retry): %r", len(self), exc)
            await asyncio.sleep(BACKOFF_S[min(self._failures, len(BACKOFF_S) - 1)])
            self._failures += 1
            return False
        if self._failures:
            logger.info("store writes resumed; %d queued records to write", len(self))
        self._failures = 0
        return True

    async def _advance(self, count: int) -> None:
        async with self._progress:
            self._processed += count
            self._progress.notify_all()

    async def drain(self, wait_s: float) -> None:
        """At shutdown: give the queue `wait_s` to empty (a store down meanwhile may come
        back); count what is left as dropped."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await self._written(self._submitted)
        if self._queue:
            self.metrics.dropped.labels("shutdown").inc(len(self._queue))
            logger.warning("server stopping: %d records not stored", len(self._queue))
            self._queue.clear()
