"""Redis (rate limits and the response cache on one server) hung and killed mid-traffic.

The drill is the `outages` benchmark's (`benchmarks/outages.py`): closed-loop traffic on
the fake engine, the session's redis-server paused with SIGSTOP or killed, then back.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.fixtures.redis_server import RedisServer
from benchmarks.outages import app_client, drill, redis_back, redis_down, redis_settings
from tests.cache.conftest import chat_body
from tests.conformance import AsyncValidatingTransport

CHAT = "/v1/chat/completions"
LIMIT_RPM = redis_settings("redis://unused")["rate_limit_rpm"]


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own: the session's is left alone by the faults."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        # The drill leaves thousands of requests' objects behind: collect them now, not in
        # the middle of a later test that times a few tens of milliseconds.
        gc.collect()


@pytest.mark.parametrize("fault", ["hung", "killed"])
async def test_redis_hung_or_killed_costs_no_request_and_little_time(
    redis_server: RedisServer, fault: str
) -> None:
    async with app_client(
        lambda inner: AsyncValidatingTransport(transport=inner), **redis_settings(redis_server.url)
    ) as client:
        # Held 3 s: the steady state is the last 2 (a loaded machine once ran no request
        # in a 1 s window).
        result, traffic = await drill(
            client, redis_server, fault, is_down=redis_down, is_back=redis_back, hold_s=3.0
        )
        print(result.summary())  # the figures, with `pytest -s`
        during = result.during(result.requests)
        assert len(during) > 20
        assert result.statuses(result.requests) == {200: len(result.requests)}
        # Measured: one command deadline (0.5 s) on the first requests of a hang, then
        # nothing: the breaker is open and Redis is not asked. Without the breaker every
        # request paid 2 s. Bounds are wide: the machine running the suite may be loaded.
        assert max(s.latency for s in during) < 3.0
        assert result.first_added_s < 1.5
        assert result.steady_added_s < 0.5
        assert result.down_after_s is not None
        assert result.down_after_s < 2.0
        assert traffic.first_up(result.fault_at, "redis", 0.0) is not None
        assert result.back_after_s is not None
        assert result.back_after_s < 5.0
        assert traffic.first_up(result.recovered_at, "redis", 1.0) is not None

        # Used again: the cache answers a repeat, the limits count again.
        body = chat_body(messages=[{"role": "user", "content": "after the outage"}])
        first = await client.post(CHAT, json=body)
        again = await client.post(CHAT, json=body)
        assert (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit")
        remaining = int(first.headers["x-ratelimit-remaining-requests"])
        left = int(again.headers["x-ratelimit-remaining-requests"])
        # One request fewer; or, if a new (fixed) window began in between, its first, after
        # a window that counted the drill's requests.
        assert left == remaining - 1 or (left == LIMIT_RPM - 1 and remaining < left)
