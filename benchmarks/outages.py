"""`outages`: what a hung or killed dependency costs, in the middle of traffic.

Our app on the fake engine (in-process, no model), on its own redis-server (rate limits
and the response cache) or its own PostgreSQL (stored completions), started here from
Debian's binaries. Closed-loop chat traffic runs throughout; a watcher polls `/health`.
Each drill: traffic, then the dependency paused with SIGSTOP (`hung`) or killed
(`killed`) for `--hold` seconds, then brought back. Measured per drill: the latency
added to a request by the fault (the first requests, and the steady state once the
breaker is open), the time from the fault to `/health` saying so, the time from the
recovery to the dependency used again, and every status seen. The store drill also
reads a stored completion throughout and checks that every stored answer is in the
database exactly once afterwards.

    python -m benchmarks outages                 # both dependencies, both faults
    python -m benchmarks outages --dependency redis --hold 5

The tests (`tests/cache/test_outages.py`, `tests/store/test_outages.py`) run the same
drills and assert on what they measure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

MODEL = "smollm2-135m-instruct"
CHAT = "/v1/chat/completions"
POLL_S = 0.05


class Service(Protocol):
    """A dependency to pause and kill (`benchmarks/fixtures/`)."""

    def freeze(self) -> None: ...
    def thaw(self) -> None: ...
    def stop(self) -> None: ...
    def start(self) -> None: ...


@dataclass
class Sample:
    began: float  # seconds since the drill began
    latency: float
    status: int
    retry_after: str | None = None
    code: str | None = None  # the error's code, if it failed


@dataclass
class Drill:
    """What one fault did to the traffic."""

    fault: str
    baseline_s: float = 0.0
    fault_at: float = 0.0
    recovered_at: float = 0.0
    down_after_s: float | None = None  # fault -> /health says so
    back_after_s: float | None = None  # recovery -> /health says ok (the dependency used)
    requests: list[Sample] = field(default_factory=list)
    reads: list[Sample] = field(default_factory=list)

    def during(self, samples: list[Sample], after_s: float = 0.0) -> list[Sample]:
        """The samples in flight between `after_s` into the fault and the recovery."""
        start = self.fault_at + after_s
        return [s for s in samples if start < s.began + s.latency and s.began < self.recovered_at]

    @property
    def first_added_s(self) -> float:
        """Added latency of the slowest request among the first ones the fault hit."""
        first = self.during(self.requests)[:8]
        return max(s.latency for s in first) - self.baseline_s

    @property
    def steady_added_s(self) -> float:
        """Added median latency from one second after the fault to the recovery."""
        steady = self.during(self.requests, after_s=1.0)
        return statistics.median(s.latency for s in steady) - self.baseline_s

    def statuses(self, samples: list[Sample]) -> Counter[int]:
        return Counter(s.status for s in samples)

    def summary(self) -> str:
        line = (
            f"{self.fault}: requests {dict(self.statuses(self.requests))}, added latency "
            f"first {self.first_added_s * 1000:.0f} ms, steady {self.steady_added_s * 1000:.1f} ms "
            f"(baseline {self.baseline_s * 1000:.1f} ms); /health said so after "
            f"{_seconds(self.down_after_s)}, back in use {_seconds(self.back_after_s)} "
            "after recovery"
        )
        if self.reads:
            during = self.during(self.reads)
            slowest = max((s.latency for s in during), default=0.0)
            line += (
                f"; reads during the fault {dict(self.statuses(during))}, "
                f"slowest {slowest * 1000:.0f} ms"
            )
        return line


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f} s"


class Traffic:
    """Closed-loop requests and a `/health` watcher against one app, all recorded."""

    def __init__(self, client: httpx.AsyncClient, drill: Drill, body: dict[str, Any]) -> None:
        self.client = client
        self.drill = drill
        self.body = body
        self.origin = time.monotonic()
        self.stored: set[str] = set()
        # Each stored answer's text, by id: what the store must give back afterwards.
        self.answers: dict[str, str] = {}
        self.health: list[tuple[float, dict[str, Any]]] = []
        # `oai_dependency_up` per dependency, as /metrics said it at each look.
        self.up: list[tuple[float, dict[str, float]]] = []

    def now(self) -> float:
        return time.monotonic() - self.origin

    async def _timed(self, samples: list[Sample], call: Awaitable[httpx.Response]) -> Any:
        began = self.now()
        response = await call
        latency = self.now() - began
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        retry = response.headers.get("retry-after")
        samples.append(Sample(began, latency, response.status_code, retry, code))
        return body

    async def ask(self, index: int, stop: asyncio.Event) -> None:
        while not stop.is_set():
            body = {**self.body, "messages": [{"role": "user", "content": f"Hi {index % 3}"}]}
            answer = await self._timed(self.drill.requests, self.client.post(CHAT, json=body))
            if self.body.get("store") and "id" in answer:
                self.stored.add(answer["id"])
                self.answers[answer["id"]] = answer["choices"][0]["message"]["content"]
            await asyncio.sleep(0.01)

    async def read(self, completion_id: str, stop: asyncio.Event) -> None:
        while not stop.is_set():
            path = f"{CHAT}/{completion_id}"
            await self._timed(self.drill.reads, self.client.get(path))
            await asyncio.sleep(0.05)

    async def watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.health.append((self.now(), (await self.client.get("/health")).json()))
            text = (await self.client.get("/metrics")).text
            self.up.append((self.now(), dict(_dependency_up(text))))
            await asyncio.sleep(POLL_S)

    def first_health(self, after: float, test: Callable[[dict[str, Any]], bool]) -> float | None:
        """Seconds after `after` until `/health` first passed `test`."""
        return next((t - after for t, body in self.health if t >= after and test(body)), None)

    def first_up(self, after: float, dependency: str, value: float) -> float | None:
        """Seconds after `after` until `oai_dependency_up{dependency}` first read `value`."""
        return next(
            (t - after for t, up in self.up if t >= after and up.get(dependency) == value), None
        )


def _dependency_up(metrics: str) -> Iterator[tuple[str, float]]:
    prefix = 'oai_dependency_up{dependency="'
    for line in metrics.splitlines():
        if line.startswith(prefix):
            name, value = line.removeprefix(prefix).split('"} ')
            yield name, float(value)


@contextlib.asynccontextmanager
async def running(*loops: Callable[[asyncio.Event], Awaitable[None]]) -> AsyncIterator[None]:
    """Run `loops` for the block; at its end each finishes what it has in flight (so every
    answer the server stored is one the traffic saw), and a loop's failure is raised."""
    stop = asyncio.Event()
    tasks = [asyncio.ensure_future(loop(stop)) for loop in loops]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)


@contextlib.asynccontextmanager
async def app_client(
    wrap: Callable[[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport] = lambda t: t,
    **settings: Any,
) -> AsyncIterator[httpx.AsyncClient]:
    """Our app on the fake engine with `settings`, and an in-process client of it (through
    `wrap`: the tests check every body against the spec)."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    engine = FakeEngine()
    app = create_app(Settings(log_level="warning", **settings), engine)
    async with app.router.lifespan_context(app):
        await engine.start()
        transport = wrap(httpx.ASGITransport(app=app))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


async def drill(
    client: httpx.AsyncClient,
    service: Service,
    fault: str,
    *,
    is_down: Callable[[dict[str, Any]], bool],
    is_back: Callable[[dict[str, Any]], bool],
    hold_s: float = 3.0,
    concurrency: int = 4,
    store: bool = False,
) -> tuple[Drill, Traffic]:
    """Traffic, `fault` ("hung" or "killed") held for `hold_s`, recovery; what it did."""
    result = Drill(fault)
    body = {"model": MODEL, "temperature": 0, "max_tokens": 8, "store": store}
    traffic = Traffic(client, result, body)
    workers = [functools.partial(traffic.ask, i) for i in range(concurrency)]
    async with running(traffic.watch, *workers):
        await asyncio.sleep(1.0)
        result.baseline_s = statistics.median(s.latency for s in result.requests)
        reader = functools.partial(traffic.read, next(iter(traffic.stored), ""))
        async with running(*([reader] if store else [])):
            await asyncio.sleep(0.5)
            result.fault_at = traffic.now()
            service.freeze() if fault == "hung" else service.stop()
            await asyncio.sleep(hold_s)
            result.recovered_at = traffic.now()
            service.thaw() if fault == "hung" else service.start()
            deadline = time.monotonic() + 10
            while traffic.first_health(result.recovered_at, is_back) is None:
                assert time.monotonic() < deadline, "the dependency never came back"
                await asyncio.sleep(POLL_S)
            await asyncio.sleep(0.5)  # traffic goes on after the recovery
    result.down_after_s = traffic.first_health(result.fault_at, is_down)
    result.back_after_s = traffic.first_health(result.recovered_at, is_back)
    return result, traffic


def redis_down(body: dict[str, Any]) -> bool:
    return bool(body.get("dependencies", {}).get("redis") == "down")


def redis_back(body: dict[str, Any]) -> bool:
    return bool(body.get("dependencies", {}).get("redis") == "ok")


def store_down(body: dict[str, Any]) -> bool:
    return bool(body.get("store") == "degraded")


def store_back(body: dict[str, Any]) -> bool:
    return bool(body.get("store") == "ok")


def redis_settings(url: str) -> dict[str, Any]:
    """Rate limits and the response cache, both on the Redis at `url`."""
    return {
        "redis_url": url,
        "response_cache": url,
        "rate_limit_rpm": 1_000_000,
        "rate_limit_tpm": 100_000_000,
    }


async def _run(dependencies: list[str], hold_s: float) -> None:
    from benchmarks.fixtures.postgres import PostgresServer
    from benchmarks.fixtures.redis_server import RedisServer

    for dependency in dependencies:
        for fault in ("hung", "killed"):
            if dependency == "redis":
                redis = RedisServer(Path(tempfile.mkdtemp(prefix="oai-outage-redis-")))
                redis.start()
                try:
                    async with app_client(**redis_settings(redis.url)) as client:
                        result, _ = await drill(
                            client, redis, fault, is_down=redis_down, is_back=redis_back,
                            hold_s=hold_s,
                        )  # fmt: skip
                finally:
                    redis.stop()
            else:
                postgres = PostgresServer()
                postgres.start()
                try:
                    async with app_client(store_url=postgres.url) as client:
                        result, _ = await drill(
                            client, postgres, fault, is_down=store_down, is_back=store_back,
                            hold_s=hold_s, store=True,
                        )  # fmt: skip
                finally:
                    if postgres.running:
                        postgres.thaw()  # a drill that failed while it hung
                    postgres.close()
            print(f"{dependency} {result.summary()}", flush=True)


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "outages",
        help="latency and health while Redis or PostgreSQL hangs or dies (fake engine)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dependency", choices=["redis", "store", "all"], default="all", help="what to fault"
    )
    parser.add_argument("--hold", type=float, default=3.0, help="seconds each fault lasts")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    chosen = ["redis", "store"] if args.dependency == "all" else [args.dependency]
    asyncio.run(_run(chosen, args.hold))
    return 0
