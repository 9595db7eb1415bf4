"""`batch`: does bulk work slow the chat, does it use idle capacity, does `priority` jump ahead.

Against one running server (start it with `--scheduling-policy priority` for the fourth):

1. interactive chat streams at `--concurrency` (4): TTFT p50/p99 alone, then the same load
   while a batch of `--lines` chat lines runs (the issue's target: p99 <= 1.25x), in
   `--turns` alternating turns (alone, beside a batch, alone, ...) so that the machine's
   other load weighs on both alike; with `--think S` each stream pauses S seconds between
   requests, so the batch refills the idle engine and each request arrives beside it;
2. with no interactive load, a batch of `--throughput-lines` lines against the same
   requests sent live at `--live-concurrency` (32), in `--turns` alternating turns:
   throughput ratio (target >= 0.8x); `--throughput-lines 0` skips it;
3. with `--bursts N`: chat that comes back after a quiet spell in which a batch ran
   (`batch_bursts`);
4. with `--priority`: `--live-concurrency` streams at the `default` tier saturating the
   engine, and a few `service_tier: priority` requests: their TTFT against the defaults'.

    python -m benchmarks batch --base-url http://127.0.0.1:8000/v1 --priority

`--turns 0` skips the first.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks import batch_bursts
from benchmarks.batch_client import cancel, chat_body, completed, finish, start_batch, ttft
from benchmarks.client import discover_model, make_client
from benchmarks.inproc import latency_summary
from benchmarks.metrics import percentile

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


async def _interactive(
    http: httpx.AsyncClient, model: str, args: argparse.Namespace, **extra: Any
) -> list[float]:
    """`args.requests` streams, `args.concurrency` at a time: each one's TTFT."""
    queue = iter(range(args.requests))
    ttfts: list[float] = []

    async def worker() -> None:
        for i in queue:
            ttfts.append(await ttft(http, chat_body(model, i, args.max_tokens, **extra)))
            await asyncio.sleep(args.think)

    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    return ttfts


async def _live_seconds(
    http: httpx.AsyncClient, model: str, count: int, concurrency: int, max_tokens: int
) -> float:
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            answer = await http.post("/chat/completions", json=chat_body(model, i, max_tokens))
            answer.raise_for_status()

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - began


def _p99_ratio(loaded: list[float], alone: list[float]) -> float:
    return (percentile(loaded, 99) or 0.0) / max(percentile(alone, 99) or 0.0, 1e-9)


async def _run(args: argparse.Namespace) -> None:
    pool = args.live_concurrency + args.concurrency + 4
    async with make_client(args.base_url, pool, 1800, args.api_key) as http:
        model = args.model or await discover_model(http)
        if args.turns:
            await _beside_batch(http, model, args)
        if args.throughput_lines:
            await _throughput(http, model, args)
        if args.bursts:
            await batch_bursts.after_quiet(http, model, args)
        if args.priority:
            await _priority(http, model, args)


async def _beside_batch(http: httpx.AsyncClient, model: str, args: argparse.Namespace) -> None:
    """Chat TTFT alone and beside a running batch, in alternating turns."""
    alone: list[float] = []
    loaded: list[float] = []
    done = 0
    for _turn in range(args.turns):
        alone += await _interactive(http, model, args)
        batch_id = await start_batch(http, model, args.lines, args.max_tokens)
        # The batch running (a line done) before the chat comes.
        while await completed(http, batch_id) < 1:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        loaded += await _interactive(http, model, args)
        done += await completed(http, batch_id)
        await cancel(http, batch_id)  # what is left would only delay the next phase
    shape = f"concurrency {args.concurrency}, think {args.think:g} s, {args.turns} turns"
    print(f"interactive alone, {shape}: TTFT {latency_summary(alone)}")
    print(f"interactive with a {args.lines}-line batch running: TTFT {latency_summary(loaded)}")
    ratio = (percentile(loaded, 50) or 0.0) / max(percentile(alone, 50) or 0.0, 1e-9)
    print(
        f"  p99 ratio {_p99_ratio(loaded, alone):.2f}x, p50 ratio {ratio:.2f}x; "
        f"{done} lines done meanwhile"
    )


async def _throughput(http: httpx.AsyncClient, model: str, args: argparse.Namespace) -> None:
    """A batch with no interactive load against the same requests sent live."""
    lines = args.throughput_lines
    batch_s = live_s = 0.0
    for _turn in range(max(args.turns, 1)):
        began = time.perf_counter()
        batch = await finish(http, await start_batch(http, model, lines, args.max_tokens))
        batch_s += time.perf_counter() - began
        assert batch["status"] == "completed", batch["status"]
        live_s += await _live_seconds(http, model, lines, args.live_concurrency, args.max_tokens)
    print(
        f"{lines} lines as a batch: {batch_s:.1f} s in all turns; live at concurrency "
        f"{args.live_concurrency}: {live_s:.1f} s; batch throughput {live_s / batch_s:.2f}x live"
    )


async def _priority(http: httpx.AsyncClient, model: str, args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    defaults: list[float] = []

    async def saturate(worker: int) -> None:
        i = worker
        while not stop.is_set():
            defaults.append(await ttft(http, chat_body(model, i, args.max_tokens)))
            i += args.live_concurrency

    load = [asyncio.create_task(saturate(w)) for w in range(args.live_concurrency)]
    await asyncio.sleep(2)  # the engine full before the first priority request
    fast: list[float] = []
    for i in range(args.priority_requests):
        body = chat_body(model, i, args.max_tokens, service_tier="priority")
        fast.append(await ttft(http, body))
    stop.set()
    await asyncio.gather(*load)
    print(
        f"under {args.live_concurrency} default streams: default TTFT {latency_summary(defaults)}"
    )
    print(f"  service_tier priority TTFT {latency_summary(fast)}")
    ratio = (percentile(fast, 50) or 0.0) / max(percentile(defaults, 50) or 0.0, 1e-9)
    print(f"  priority p50 / default p50: {ratio:.2f}x")


def _command(args: argparse.Namespace) -> int:
    asyncio.run(_run(args))
    return 0


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "batch", help="the Batch API and service tiers: chat TTFT beside a batch, throughput"
    )
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--model", default=None, help="default: the first the server lists")
    parser.add_argument("--concurrency", type=int, default=4, help="interactive streams")
    parser.add_argument("--requests", type=int, default=40, help="interactive requests a turn")
    parser.add_argument("--turns", type=int, default=2, help="alone / beside a batch turns")
    parser.add_argument(
        "--think", type=float, default=0.0, help="seconds each stream pauses between requests"
    )
    parser.add_argument("--lines", type=int, default=2000, help="the batch beside the chat")
    parser.add_argument("--throughput-lines", type=int, default=128)
    parser.add_argument("--live-concurrency", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--priority", action="store_true", help="also measure service tiers")
    parser.add_argument("--priority-requests", type=int, default=8)
    batch_bursts.add_arguments(parser)
    parser.set_defaults(handler=_command)
