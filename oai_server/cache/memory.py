"""The in-memory backend: least recently used entries go first, bounded in bytes."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from oai_server.cache.backend import CacheBackend
from oai_server.cache.metrics import CacheMetrics


class MemoryBackend(CacheBackend):
    """Entries of this process; at most `max_bytes` of them, each kept `ttl` seconds.

    The bound counts the encoded entry and its key, which is what the process holds
    beyond a small constant per entry. An entry larger than the bound is not stored.
    """

    def __init__(
        self,
        max_bytes: int,
        ttl: float,
        metrics: CacheMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_bytes = max_bytes
        self._ttl = ttl
        self._metrics = metrics
        self._clock = clock
        # key -> (expires at, value); the end of the order is the most recently used.
        self._entries: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._bytes = 0

    async def get(self, key: str) -> bytes | None:
        found = self._entries.get(key)
        if found is None:
            return None
        expires, value = found
        if expires <= self._clock():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return value

    async def set(self, key: str, value: bytes) -> None:
        size = len(key) + len(value)
        if size > self._max_bytes:
            return
        if key in self._entries:
            self._drop(key)
        self._entries[key] = (self._clock() + self._ttl, value)
        self._bytes += size
        while self._bytes > self._max_bytes:
            oldest = next(iter(self._entries))
            self._drop(oldest)
            self._metrics.evictions.inc()

    def bytes_held(self) -> int:
        return self._bytes

    def _drop(self, key: str) -> None:
        _, value = self._entries.pop(key)
        self._bytes -= len(key) + len(value)
