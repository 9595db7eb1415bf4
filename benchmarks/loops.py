"""Load generation: a closed loop at a fixed concurrency, or Poisson arrivals at a rate.

Both are generic over `send`, one coroutine per request, so the same loops drive an HTTP server
and the engine in-process. Both are bounded: by the number of requests given, and by a deadline
after which the requests still in flight are cancelled and counted as such.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

from benchmarks.records import RequestRecord
from benchmarks.workloads import RequestSpec

Send = Callable[[RequestSpec], Awaitable[RequestRecord]]
OnDone = Callable[[RequestRecord], None]


@dataclass(frozen=True)
class LoadSpec:
    """One load point: `concurrency` for a closed loop, or `rate` (requests/s; inf for all at once)
    for an open loop, optionally capped at `max_concurrency` requests in flight."""

    concurrency: int | None = None
    rate: float | None = None
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("a load point has either a concurrency or a rate")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.rate is not None and not self.rate > 0:
            raise ValueError("rate must be positive")

    def pool_size(self, requests: int) -> int:
        """Connections needed so that no request waits for one inside the client."""
        return max(1, min(self.concurrency or self.max_concurrency or requests, requests))

    def describe(self) -> dict[str, object]:
        """The load point as recorded in a result."""
        if self.concurrency is not None:
            return {"mode": "closed", "concurrency": self.concurrency}
        rate = self.rate if self.rate is not None and math.isfinite(self.rate) else "inf"
        return {"mode": "open", "rate": rate, "max_concurrency": self.max_concurrency}


@dataclass
class LoopResult:
    """What a loop did: each finished request with its spec, wall time, and requests cut off."""

    finished: list[tuple[RequestSpec, RequestRecord]] = field(default_factory=list)
    duration_s: float = 0.0
    cancelled: int = 0
    hit_deadline: bool = False

    @property
    def records(self) -> list[RequestRecord]:
        return [record for _, record in self.finished]


async def run_load(
    send: Send,
    specs: Sequence[RequestSpec],
    load: LoadSpec,
    *,
    deadline: float,
    on_done: OnDone | None = None,
    seed: int = 0,
) -> LoopResult:
    """Send `specs` under `load` until all are done or `deadline` (`time.perf_counter()`) passes."""
    result = LoopResult()
    started = 0

    async def send_one(spec: RequestSpec) -> None:
        nonlocal started
        started += 1
        record = await send(spec)
        result.finished.append((spec, record))
        if on_done is not None:
            on_done(record)

    start = time.perf_counter()
    if load.concurrency is not None:
        work = _closed_loop(send_one, iter(specs), load.concurrency)
    else:
        assert load.rate is not None
        work = _open_loop(send_one, specs, load.rate, load.max_concurrency, random.Random(seed))
    try:
        await asyncio.wait_for(work, timeout=max(0.0, deadline - start))
    except TimeoutError:
        result.hit_deadline = True
    result.duration_s = time.perf_counter() - start
    result.cancelled = started - len(result.finished)
    return result


async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the tasks still running (at the deadline) and wait until they have ended."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _closed_loop(
    send_one: Callable[[RequestSpec], Awaitable[None]], specs: Iterator[RequestSpec], n: int
) -> None:
    async def worker() -> None:
        # The workers share one iterator: each takes the next spec as soon as its request is done.
        for spec in specs:
            await send_one(spec)

    tasks = [asyncio.ensure_future(worker()) for _ in range(n)]
    try:
        await asyncio.gather(*tasks)
    finally:
        await _cancel_all(tasks)


async def _open_loop(
    send_one: Callable[[RequestSpec], Awaitable[None]],
    specs: Sequence[RequestSpec],
    rate: float,
    max_concurrency: int | None,
    rng: random.Random,
) -> None:
    limit: contextlib.AbstractAsyncContextManager[object] = (
        asyncio.Semaphore(max_concurrency) if max_concurrency else contextlib.nullcontext()
    )

    async def arrive(spec: RequestSpec) -> None:
        async with limit:
            await send_one(spec)

    # Arrival times count from the start, not from the previous wake-up, so sleeps do not drift.
    tasks: list[asyncio.Task[None]] = []
    due = time.perf_counter()
    try:
        for i, spec in enumerate(specs):
            if i and math.isfinite(rate):
                due += rng.expovariate(rate)
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(arrive(spec)))
        await asyncio.gather(*tasks)
    finally:
        await _cancel_all(tasks)
