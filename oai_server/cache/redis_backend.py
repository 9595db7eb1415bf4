"""The Redis backend: entries shared by every replica, expired by Redis itself.

Redis being down or slow must never fail a request nor slow it much: every command has
a short deadline and no retries, a failure is logged (once per outage) and counted, and
for `pause` seconds afterwards Redis is not asked at all, so an outage costs at most one
deadline per pause rather than one per request. Afterwards the next command tries again:
redis-py reconnects by itself, so the cache works again as soon as Redis is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from oai_server.cache.backend import CacheBackend
from oai_server.cache.metrics import CacheMetrics

logger = logging.getLogger(__name__)

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
        *,
        timeout: float = 0.25,
        pause: float = 1.0,
        claim_ttl: float = 30.0,
    ) -> None:
        self._client = aioredis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )
        self._ttl_ms = max(1, round(ttl * 1000))
        self._metrics = metrics
        self._timeout = timeout
        self._pause = pause
        self._paused_until = 0.0
        self._down = False
        # A claim outlives its replica by at most this long; a longer answer may be
        # computed twice, never withheld.
        self._claim_ms = max(1, round(claim_ttl * 1000))
        self._token = uuid.uuid4().hex

    async def get(self, key: str) -> bytes | None:
        if self._paused():
            return None
        try:
            async with asyncio.timeout(self._timeout):
                value = await self._client.get(KEY_PREFIX + key)
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed("read", exc)
            return None
        self._recovered()
        return value if isinstance(value, bytes) else None

    async def set(self, key: str, value: bytes) -> None:
        if self._paused():
            return
        try:
            async with asyncio.timeout(self._timeout):
                await self._client.set(KEY_PREFIX + key, value, px=self._ttl_ms)
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed("write", exc)
            return
        self._recovered()

    async def claim(self, key: str) -> bool:
        if self._paused():
            return True
        try:
            async with asyncio.timeout(self._timeout):
                taken = await self._client.set(
                    CLAIM_PREFIX + key, self._token, nx=True, px=self._claim_ms
                )
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed("claim", exc)
            return True
        self._recovered()
        return bool(taken)

    async def claimed(self, key: str) -> bool:
        if self._paused():
            return False
        try:
            async with asyncio.timeout(self._timeout):
                found = await self._client.exists(CLAIM_PREFIX + key)
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed("read", exc)
            return False
        return bool(found)

    async def release(self, key: str) -> None:
        if self._paused():
            return
        try:
            async with asyncio.timeout(self._timeout):
                await self._client.eval(_RELEASE, 1, CLAIM_PREFIX + key, self._token)
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed("write", exc)

    async def close(self) -> None:
        await self._client.aclose()

    def _paused(self) -> bool:
        return self._down and time.monotonic() < self._paused_until

    def _failed(self, what: str, exc: BaseException) -> None:
        self._metrics.backend_errors.inc()
        self._paused_until = time.monotonic() + self._pause
        if not self._down:
            logger.warning(
                "response cache: Redis %s failed (%r); answering from the engine, "
                "retrying Redis in %.1f s",
                what,
                exc,
                self._pause,
            )
        self._down = True

    def _recovered(self) -> None:
        if self._down:
            logger.info("response cache: Redis is back")
            self._down = False
