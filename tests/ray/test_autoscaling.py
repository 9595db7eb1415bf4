"""Serve's autoscaler adds a replica under sustained load and removes it afterwards.

Target: 2 ongoing requests per replica; the load is 8 streams at a time, so one replica
is 4x over target. The replicas-over-time trace is printed (run with -s to see it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.conformance import AsyncValidatingTransport
from tests.ray.conftest import FAKE, RayServe, deployed, replica_states
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
ADDED = {"STARTING", "UPDATING", "RECOVERING", "RUNNING"}  # not stopping


@pytest.fixture(scope="module")
def url(ray_serve: RayServe) -> Iterator[str]:
    with deployed(APP, engine_factory=FAKE, **SETTINGS):
        yield ray_serve.url


async def test_a_replica_is_added_under_load_and_removed_after(url: str) -> None:
    began = time.monotonic()
    # (seconds, replicas Serve has added and not stopping, replicas running)
    trace: list[tuple[float, int, int]] = []

    async def record(until: asyncio.Event) -> None:
        while not until.is_set():
            states = await asyncio.to_thread(replica_states, APP)
            counts = (sum(n for s, n in states.items() if s in ADDED), states.get("RUNNING", 0))
            if not trace or trace[-1][1:] != counts:
                trace.append((round(time.monotonic() - began, 1), *counts))
            await asyncio.sleep(0.25)

    load_done, trace_done = asyncio.Event(), asyncio.Event()
    served: list[Stream] = []

    async def user(http: httpx.AsyncClient) -> None:
        while not load_done.is_set():
            stream = Stream()
            await read_stream(http, url, 20, stream)
            served.append(stream)

    async def until(what: str, timeout_s: float, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            for failed in (u for u in users if u.done()):
                failed.result()  # a user's failure, not a missing replica, is the news
            assert time.monotonic() < deadline, f"{what}: {trace}"
            await asyncio.sleep(0.25)

    recorder = asyncio.create_task(record(trace_done))
    async with httpx.AsyncClient(transport=AsyncValidatingTransport(), timeout=30) as http:
        users = [asyncio.create_task(user(http)) for _ in range(8)]
        # The autoscaler's decision is quick; the replica's start (a process that imports
        # the server and vLLM) is what a loaded machine slows, so it has its own bound.
        await until("no replica added under load", 40, lambda: bool(trace) and trace[-1][1] >= 2)
        await until("the added replica never ran", 120, lambda: trace[-1][2] >= 2)
        # The load goes on until the new replica has served a stream (the proxy learns of
        # it late on a loaded machine), not for a fixed while.
        both_served = lambda: len({s.replica for s in served}) >= 2  # noqa: E731
        await until("the added replica served nothing", 30, both_served)
        load_done.set()
        await asyncio.gather(*users)
    load_ended = round(time.monotonic() - began, 1)
    # Serve averages the load over 30 s (look_back_period_s) before it sees it gone.
    await until("the extra replica stayed", 90, lambda: trace[-1][1] <= 1)
    trace_done.set()
    await recorder

    print(f"\nreplicas over time (s, added, running), load from 0 to {load_ended} s: {trace}")
    assert trace[0][1:] == (1, 1)
    assert max(added for _, added, _ in trace) == 2
    assert trace[-1][1:] == (1, 1)
    assert len({s.replica for s in served}) == 2, "the added replica served nothing"
    assert all(s.done and s.text == expected_text(20) for s in served)
