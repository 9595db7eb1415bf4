"""PostgreSQL hung and killed under traffic that stores its answers and reads them back.

The drill is the `outages` benchmark's (`benchmarks/outages.py`): closed-loop chat
completions with `store: true` and a reader of one stored completion, on the fake engine;
the session's PostgreSQL paused with SIGSTOP (every process of it) or shut down, then back.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import asyncpg
import httpx
import pytest

from benchmarks.fixtures.postgres import PostgresServer
from benchmarks.outages import app_client, drill, store_back, store_down
from oai_server.resilience import Breaker
from oai_server.store.health import STALE_S, StoreHealth
from tests.conformance import AsyncValidatingTransport

_databases = itertools.count()


async def _metrics(client: httpx.AsyncClient) -> str:
    return (await client.get("/metrics")).text


@pytest.mark.parametrize("fault", ["hung", "killed"])
async def test_a_stalled_or_dead_store_is_seen_refused_fast_and_loses_nothing(
    postgres: PostgresServer, fault: str
) -> None:
    url = await postgres.create_database(f"outage_{fault}_{next(_databases)}")
    async with app_client(
        lambda inner: AsyncValidatingTransport(transport=inner), store_url=url
    ) as client:
        result, traffic = await drill(
            client, postgres, fault, is_down=store_down, is_back=store_back, hold_s=3.0, store=True
        )
        print(result.summary())  # the figures, with `pytest -s`

        # Answers never wait for the store.
        assert result.statuses(result.requests) == {200: len(result.requests)}
        assert max(s.latency for s in result.during(result.requests)) < 3.0
        # /health and the metrics see it within seconds, hung as well as dead.
        assert result.down_after_s is not None
        assert result.down_after_s < 5.0  # measured: 0.2 s killed, 1.6-2.0 s hung
        if fault == "killed":
            # A hang shows first as a stale queue (/health degraded, oai_store_healthy 0);
            # the breaker opens only once a call runs past its deadline.
            assert traffic.first_up(result.fault_at, "store", 0.0) is not None
        # Reads answer 503 store_unavailable with Retry-After, within their deadline.
        reads = result.during(result.reads)
        refused = [s for s in reads if s.status == 503]
        assert refused or fault == "hung"  # a read caught in a hang may finish after it
        assert all(s.code == "store_unavailable" and s.retry_after for s in refused)
        assert {s.status for s in reads} <= {200, 503}
        # Up to 2 s waiting for queued writes, 1.5 s for the query.
        assert max(s.latency for s in reads) < 5.0
        # Back: healthy, reads answered, and the queue written out.
        assert result.back_after_s is not None
        assert result.back_after_s < 5.0
        assert traffic.first_up(result.recovered_at, "store", 1.0) is not None
        assert result.reads[-1].status == 200
        async with asyncio.timeout(10):
            while "oai_store_queue_depth 0.0" not in await _metrics(client):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert "oai_store_dropped_total{" not in await _metrics(client)

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT id FROM store_objects WHERE kind = 'chat.completion'")
    finally:
        await conn.close()
    stored = [row["id"] for row in rows]
    assert len(stored) == len(set(stored))  # none written twice
    assert set(stored) == traffic.stored  # none lost


async def test_the_store_is_degraded_while_a_queued_write_waits_too_long() -> None:
    async def answers() -> None:
        return None

    queued_at: list[float | None] = [None]
    health = StoreHealth(Breaker("store", answers), lambda: queued_at[0])
    assert health.status == "ok"
    queued_at[0] = time.monotonic() - STALE_S / 2
    assert health.status == "ok"
    queued_at[0] = time.monotonic() - STALE_S - 0.1
    assert health.status == "degraded"
