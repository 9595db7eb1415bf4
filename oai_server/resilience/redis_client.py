"""Redis clients for the request path: a short deadline on connecting and on every command.

No retries inside the client: redis-py's default retries three times with backoff, which
turned a hung Redis into seconds per request. Whether to try again is the breaker's call.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis import exceptions as redis_errors
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from oai_server.resilience.breaker import Breaker
from oai_server.resilience.dependencies import Dependencies

# A Redis command on loopback or in the same cluster takes well under a millisecond, but the
# deadline also counts time the event loop is busy elsewhere: 0.25 s was exceeded against a
# healthy Redis on a loaded 2-core machine, marking it down for nothing.
REDIS_TIMEOUT_S = 0.5


def redis_client(
    url: str, dependencies: Dependencies, name: str, timeout: float = REDIS_TIMEOUT_S
) -> tuple[aioredis.Redis, Breaker]:
    """A client of the Redis at `url`, and the breaker of dependency `name` (probed by PING)."""
    client = aioredis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )

    async def ping() -> None:
        await client.ping()

    timeouts = (redis_errors.TimeoutError,)
    breaker = Breaker(name, ping, probe_timeout=timeout, timeout_errors=timeouts)
    return client, dependencies.add(breaker)
