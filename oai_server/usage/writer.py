"""The usage tallies written off the request path: every few seconds, one insert.

A request adds to the meter's totals in memory (`oai_server.observability.usage`); this
task snapshots what they gained, as that minute's tallies, and appends those to the
store's database through the store's breaker.
While the database is down, or a write fails, the tallies go back to the meter and wait
for the next round, up to the meter's bound (beyond it they are dropped and counted in
`oai_usage_dropped_requests_total`; the `/metrics` counters keep them); what is still
waiting when the server stops after its last try is lost. Nothing else waits for this.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from oai_server.observability.usage import UsageMeter
from oai_server.resilience import Breaker
from oai_server.usage.records import UsageRecords

logger = logging.getLogger(__name__)

INTERVAL_S = 2.0
WRITE_S = 10.0


class UsageWriter:
    def __init__(self, meter: UsageMeter, records: UsageRecords, breaker: Breaker) -> None:
        self.meter = meter
        self.records = records
        self.breaker = breaker
        self._lock = asyncio.Lock()
        self._failures = 0

    async def flush(self) -> None:
        """Write what the meter has kept so far; on failure keep it for the next round."""
        async with self._lock:
            taken = self.meter.take()
            if not taken:
                return
            try:
                await self.breaker.call(self.records.add(taken), WRITE_S)
            except Exception as exc:  # noqa: BLE001 - the store is away: try next round
                self.meter.put_back(taken)
                if self._failures % 50 == 0:
                    logger.warning("usage not written yet (will retry): %r", exc)
                self._failures += 1
                return
            self._failures = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)
            if self.breaker.up:
                await self.flush()
            else:
                # Stamped with their minute now, written once the database is back.
                self.meter.snapshot()

    async def stop(self, task: asyncio.Task[None] | None) -> None:
        """Stop the loop, then one last write."""
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.flush()
        lost = sum(t.requests for t in self.meter.take().values())
        if lost:
            logger.warning("server stopping: usage of %d model requests not stored", lost)
