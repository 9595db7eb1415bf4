"""The Redis backend: entries shared by every replica, expired by Redis itself.

Redis being down or slow must never fail a request nor slow it much: every command has
a short deadline and no retries, and a failure is counted. The dependency's breaker
(`oai_server.resilience`) marks Redis down after a timeout or a few errors; while it is
down the cache is not asked at all (every lookup a miss, every claim granted), and its
background probe brings the cache back as soon as Redis answers again.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import TypeVar

from redis.exceptions import RedisError

from oai_server.cache.backend import CacheBackend
from oai_server.cache.metrics import CacheMetrics
from oai_server.resilience import Dependencies, DependencyDownError
from oai_server.resilience.redis_client import REDIS_TIMEOUT_S, redis_client

T = TypeVar("T")

KEY_PREFIX = "oai:cache:"
CLAIM_PREFIX = "oai:cache-claim:"
# Delete a claim only if it is still ours (it may have expired and been taken since).
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end"


class RedisBackend(CacheBackend):
    """Entries in the Redis at `url`, each with a TTL of `ttl` seconds."""

    def __init__(
        self,
        url: str,
        ttl: float,
        metrics: CacheMetrics,
        dependencies: Dependencies,
        *,
        name: str = "redis",
        claim_ttl: float = 30.0,
    ) -> None:
        self._client, self._breaker = redis_client(url, dependencies, name)
        self._ttl_ms = max(1, round(ttl * 1000))
        self._metrics = metrics
        # A claim outlives its replica by at most this long; a longer answer may be
        # computed twice, never withheld.
        self._claim_ms = max(1, round(claim_ttl * 1000))
        self._token = uuid.uuid4().hex

    async def get(self, key: str) -> bytes | None:
        value = await self._ask(self._client.get(KEY_PREFIX + key), None)
        return value if isinstance(value, bytes) else None

    async def set(self, key: str, value: bytes) -> None:
        await self._ask(self._client.set(KEY_PREFIX + key, value, px=self._ttl_ms), None)

    async def claim(self, key: str) -> bool:
        command = self._client.set(CLAIM_PREFIX + key, self._token, nx=True, px=self._claim_ms)
        return bool(await self._ask(command, True))

    async def claimed(self, key: str) -> bool:
        return bool(await self._ask(self._client.exists(CLAIM_PREFIX + key), False))

    async def release(self, key: str) -> None:
        await self._ask(self._client.eval(_RELEASE, 1, CLAIM_PREFIX + key, self._token), None)

    async def close(self) -> None:
        await self._client.aclose()

    async def _ask(self, command: Awaitable[T], otherwise: T) -> T:
        """The command's answer; `otherwise` if Redis fails, hangs or is marked down."""
        try:
            return await self._breaker.call(command, REDIS_TIMEOUT_S)
        except DependencyDownError:
            return otherwise
        except (RedisError, OSError, TimeoutError):
            self._metrics.backend_errors.inc()
            return otherwise
