"""Many stored completions at once; a restart keeps them; PostgreSQL going away and back."""

from __future__ import annotations

import asyncio
import re

import httpx

from benchmarks.fixtures.postgres import PostgresServer
from oai_server.engine.fake import FakeEngine
from tests.conformance import AsyncValidatingTransport
from tests.live import serve_async
from tests.store.conftest import MODEL, async_sdk, make_app


async def _ask_many(base: str, count: int, tag: str) -> list[str]:
    async with async_sdk(base) as client:
        answers = await asyncio.gather(
            *(
                client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": f"{tag} {i}"}],
                    store=True,
                    metadata={"batch": tag},
                )
                for i in range(count)
            )
        )
    assert all(a.choices[0].message.content for a in answers)
    return [a.id for a in answers]


async def _listed(base: str, **filters: object) -> list[str]:
    async with async_sdk(base) as client:
        return [c.id async for c in client.chat.completions.list(limit=100, **filters)]  # type: ignore[arg-type]


async def _listed_once_written(base: str, count: int) -> list[str]:
    """The list once `count` objects are in it (at most 30 s). A read waits for this
    replica's queued writes only up to 2 s, and a loaded machine can take longer to write
    a burst of 200 (CI listed 99); what this test holds is that each is stored, once."""
    async with asyncio.timeout(30):
        while len(listed := await _listed(base)) < count:  # noqa: ASYNC110 - over HTTP
            await asyncio.sleep(0.2)
    return listed


async def test_200_concurrent_completions_are_all_stored_once_and_survive_a_restart(
    store_url: str,
) -> None:
    async with serve_async(make_app(store_url, FakeEngine(token_delay=0.001))) as base:
        asked = await _ask_many(base, 200, "load")
        listed = await _listed_once_written(base, 200)
        assert len(listed) == 200
        assert sorted(listed) == sorted(asked)
    async with serve_async(make_app(store_url)) as base:
        assert sorted(await _listed(base, metadata={"batch": "load"})) == sorted(asked)


async def _get(base: str, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=AsyncValidatingTransport()) as client:
        return await client.get(f"{base}{path}")


async def _wait_for_store(base: str, status: str) -> None:
    async with asyncio.timeout(20):
        while True:
            health = await _get(base, "/health")
            assert health.status_code == 200
            if health.json()["store"] == status:
                return
            await asyncio.sleep(0.1)


def _counter(metrics: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", metrics, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


async def test_answers_survive_postgresql_going_away_and_storing_resumes() -> None:
    server = PostgresServer()
    server.start()
    try:
        url = await server.create_database("outage")
        async with serve_async(make_app(url)) as base:
            before = await _ask_many(base, 10, "before")
            assert len(await _listed(base)) == 10

            await asyncio.to_thread(server.stop)
            during = await _ask_many(base, 20, "during")  # every answer still comes back
            await _wait_for_store(base, "degraded")
            metrics = (await _get(base, "/metrics")).text
            assert _counter(metrics, "oai_store_write_errors_total") > 0
            assert _counter(metrics, "oai_store_healthy") == 0

            await asyncio.to_thread(server.start)
            await _wait_for_store(base, "ok")
            after = await _ask_many(base, 5, "after")
            # What was queued while the database was down was written once it came back.
            assert sorted(await _listed(base)) == sorted(before + during + after)
    finally:
        server.close()
