"""Whether the store keeps up: what `/health` reports, apart from the engine's health.

Degraded while the database's breaker marks it down (it failed, or a call ran past its
deadline), and also while the oldest queued write has waited more than `STALE_S`: a
database that hangs without an error shows first as writes that do not leave the queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from oai_server.resilience import Breaker

STALE_S = 2.0


class StoreHealth:
    def __init__(self, breaker: Breaker, oldest_queued: Callable[[], float | None]) -> None:
        self.breaker = breaker
        self._oldest_queued = oldest_queued

    @property
    def ok(self) -> bool:
        if not self.breaker.up:
            return False
        queued_at = self._oldest_queued()
        return queued_at is None or time.monotonic() - queued_at <= STALE_S

    @property
    def status(self) -> Literal["ok", "degraded"]:
        return "ok" if self.ok else "degraded"
