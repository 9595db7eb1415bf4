"""Where the counters live: this process, or Redis shared by every replica.

A limit is a fixed window: the counter of (key, window index) may grow to the limit,
and a new window starts from zero. Both backends check and add in one atomic step,
so two concurrent requests cannot both take the last unit.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from redis.exceptions import RedisError

from oai_server.resilience import Dependencies, DependencyDownError
from oai_server.resilience.redis_client import REDIS_TIMEOUT_S, redis_client

logger = logging.getLogger(__name__)


class Backend(Protocol):
    async def take(self, key: str, amount: int, limit: int, ttl_s: float) -> tuple[bool, int]:
        """Add `amount` to `key` unless that would pass `limit`; (taken, count now)."""
        ...

    async def count(self, key: str) -> int:
        """The counter's value (0 for a key not seen)."""
        ...

    async def add(self, key: str, amount: int, ttl_s: float) -> None:
        """Add `amount` (negative to give back) unconditionally."""
        ...

    async def close(self) -> None: ...


class MemoryBackend:
    """Counters in a dict, each dropped once its window (its time to live) is over."""

    def __init__(self) -> None:
        self._counts: dict[str, tuple[int, float]] = {}

    def _get(self, key: str) -> int:
        entry = self._counts.get(key)
        if entry is None:
            return 0
        if entry[1] <= time.monotonic():
            del self._counts[key]
            return 0
        return entry[0]

    def _set(self, key: str, value: int, ttl_s: float) -> None:
        now = time.monotonic()
        if len(self._counts) > _SWEEP_AT:
            self._counts = {k: e for k, e in self._counts.items() if e[1] > now}
        self._counts[key] = (value, now + ttl_s)

    async def take(self, key: str, amount: int, limit: int, ttl_s: float) -> tuple[bool, int]:
        used = self._get(key)
        if used + amount > limit:
            return False, used
        self._set(key, used + amount, ttl_s)
        return True, used + amount

    async def count(self, key: str) -> int:
        return self._get(key)

    async def add(self, key: str, amount: int, ttl_s: float) -> None:
        self._set(key, max(0, self._get(key) + amount), ttl_s)

    async def close(self) -> None:
        self._counts.clear()


# Expired counters are swept when there are more than this many (one per key and window).
_SWEEP_AT = 10_000


# What Redis being down or hung raises here: the request goes on without it.
_UNAVAILABLE = (RedisError, OSError, TimeoutError, DependencyDownError)

# Check and add in one step on the server: no other client runs between the two.
_TAKE = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local amount = tonumber(ARGV[1])
if used + amount > tonumber(ARGV[2]) then
  return {0, used}
end
used = redis.call('INCRBY', KEYS[1], amount)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, used}
"""


class RedisBackend:
    """Counters in Redis, so every replica counts against the same limit.

    If Redis cannot be reached or does not answer within its deadline, requests pass (the
    breaker logs the outage once): an outage of the limits' store should not become an
    outage of the service, nor make every request wait on it.
    """

    def __init__(self, url: str, dependencies: Dependencies, name: str = "redis") -> None:
        self._redis, self._breaker = redis_client(url, dependencies, name)
        self._take = self._redis.register_script(_TAKE)

    async def take(self, key: str, amount: int, limit: int, ttl_s: float) -> tuple[bool, int]:
        work = self._take(keys=[key], args=[amount, limit, int(ttl_s * 1000)])
        try:
            taken, used = await self._breaker.call(work, REDIS_TIMEOUT_S)
        except _UNAVAILABLE as exc:
            logger.debug("rate limits unavailable, request let through: %r", exc)
            return True, 0
        return bool(taken), int(used)

    async def count(self, key: str) -> int:
        try:
            value = await self._breaker.call(self._redis.get(key), REDIS_TIMEOUT_S)
        except _UNAVAILABLE:
            return 0
        return int(value or 0)

    async def add(self, key: str, amount: int, ttl_s: float) -> None:
        try:
            await self._breaker.call(self._add(key, amount, ttl_s), REDIS_TIMEOUT_S)
        except _UNAVAILABLE as exc:
            logger.debug("rate limits unavailable, tokens not settled: %r", exc)

    async def _add(self, key: str, amount: int, ttl_s: float) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incrby(key, amount)
            pipe.pexpire(key, int(ttl_s * 1000))
            await pipe.execute()

    async def close(self) -> None:
        await self._redis.aclose()
