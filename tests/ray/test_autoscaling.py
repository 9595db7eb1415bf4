"""Serve's autoscaler adds a replica under sustained load and removes it afterwards.

Target: 2 ongoing requests per replica; the load is 8 streams at a time, so one replica
is 4x over target. The replicas-over-time trace is printed (run with -s to see it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conformance import AsyncValidatingTransport
from tests.ray.conftest import FAKE, RayServe, deployed, running_replicas
from tests.ray.streams import Stream, expected_text, read_stream

APP = "auto"
SETTINGS = {
    "ray_min_replicas": 1,
    "ray_max_replicas": 2,
    "ray_target_ongoing_requests": 2,
    "ray_upscale_delay_s": 1,
    "ray_downscale_delay_s": 2,
    "ray_num_cpus": 0.5,
}


@pytest.fixture(scope="module")
def url(ray_serve: RayServe) -> Iterator[str]:
    with deployed(APP, engine_factory=FAKE, **SETTINGS):
        yield ray_serve.url


async def test_a_replica_is_added_under_load_and_removed_after(url: str) -> None:
    began = time.monotonic()
    trace: list[tuple[float, int]] = []

    async def record(until: asyncio.Event) -> None:
        while not until.is_set():
            count = await asyncio.to_thread(running_replicas, APP)
            if not trace or trace[-1][1] != count:
                trace.append((round(time.monotonic() - began, 1), count))
            await asyncio.sleep(0.25)

    load_done, trace_done = asyncio.Event(), asyncio.Event()
    served: list[Stream] = []

    async def user(http: httpx.AsyncClient) -> None:
        while not load_done.is_set():
            stream = Stream()
            await read_stream(http, url, 20, stream)
            served.append(stream)

    recorder = asyncio.create_task(record(trace_done))
    async with httpx.AsyncClient(transport=AsyncValidatingTransport(), timeout=30) as http:
        users = [asyncio.create_task(user(http)) for _ in range(8)]
        deadline = time.monotonic() + 40
        while not trace or trace[-1][1] < 2:
            assert time.monotonic() < deadline, f"no replica added under load: {trace}"
            await asyncio.sleep(0.25)
        # The load goes on until the new replica has served a stream (the proxy learns of
        # it late on a loaded machine), not for a fixed while.
        deadline = time.monotonic() + 30
        while len({s.replica for s in served}) < 2:
            assert time.monotonic() < deadline, f"the added replica served nothing: {trace}"
            await asyncio.sleep(0.25)
        load_done.set()
        await asyncio.gather(*users)
    load_ended = round(time.monotonic() - began, 1)
    deadline = time.monotonic() + 60
    while trace[-1][1] > 1:
        assert time.monotonic() < deadline, f"the extra replica stayed: {trace}"
        await asyncio.sleep(0.25)
    trace_done.set()
    await recorder

    print(f"\nreplicas over time (s, running), load from 0 to {load_ended} s: {trace}")
    counts = [count for _, count in trace]
    assert counts[0] == 1
    assert 2 in counts
    assert counts[-1] == 1
    assert len({s.replica for s in served}) == 2, "the added replica served nothing"
    assert all(s.done and s.text == expected_text(20) for s in served)
