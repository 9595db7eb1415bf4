"""`store`: what `store: true` costs, and how fast a metadata-filtered list is.

- `store cost`: streamed chat completions at a fixed concurrency against our app on the fake
  engine (a scripted token delay stands in for the model, so only the store's cost varies),
  alternating rounds with and without `store: true` (A B A B); p50/p99 latency and output
  tokens per second of each, and their ratios.
- `store list`: a store seeded with `--rows` stored completions (written directly, in
  batches), then `GET /v1/chat/completions?metadata[user]=...&limit=20` over HTTP; p50/p99.

The server runs in a thread of this process (uvicorn, its own event loop), the client on
the main loop; both conditions share that arrangement.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from benchmarks.inproc import MODEL, add_load_options, fake_app, latency_summary, serving
from benchmarks.metrics import percentile

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


async def _one(client: httpx.AsyncClient, store: bool, max_tokens: int) -> tuple[float, int]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Count for me"}],
        "stream": True,
        "store": store,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "metadata": {"bench": "cost"},
    }
    began = time.perf_counter()
    chunks = 0
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {") and '"content":"tok"' in line:
                chunks += 1
    return time.perf_counter() - began, chunks


async def _round(base: str, store: bool, args: argparse.Namespace) -> dict[str, float]:
    limits = httpx.Limits(max_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as client:
        todo = iter(range(args.requests))
        results: list[tuple[float, int]] = []

        async def worker() -> None:
            for _ in todo:
                results.append(await _one(client, store, args.max_tokens))

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        wall = time.perf_counter() - began
    latencies = [r[0] for r in results]
    return {
        "p50_s": statistics.median(latencies),
        "p99_s": percentile(latencies, 99) or 0.0,
        "tokens_per_s": sum(r[1] for r in results) / wall,
    }


def _cost(args: argparse.Namespace) -> int:

    rounds: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with serving(fake_app(args.store_url, token_delay=args.token_delay)) as base:
        asyncio.run(_round(base, False, args))  # warm-up
        for _ in range(args.rounds):
            for store in (False, True):
                rounds[store].append(asyncio.run(_round(base, store, args)))
    summary = {
        store: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
        for store, rs in rounds.items()
    }
    off, on = summary[False], summary[True]
    print(f"store cost: {args.store_url.split(':')[0]}, concurrency {args.concurrency}, "
          f"{args.requests} requests x {args.rounds} rounds, {args.max_tokens} tokens, "
          f"token delay {args.token_delay * 1000:.1f} ms")  # fmt: skip
    for name, row in (("store:false", off), ("store:true", on)):
        print(f"  {name:12} p50 {row['p50_s'] * 1000:7.1f} ms  p99 {row['p99_s'] * 1000:7.1f} ms"
              f"  {row['tokens_per_s']:8.0f} tok/s")  # fmt: skip
    print(f"  ratio on/off: p50 {on['p50_s'] / off['p50_s']:.3f}  p99 "
          f"{on['p99_s'] / off['p99_s']:.3f}  throughput "
          f"{on['tokens_per_s'] / off['tokens_per_s']:.3f}")  # fmt: skip
    return 0


async def _seed(store_url: str, rows: int, users: int) -> None:
    from oai_server.store.interface import ListQuery, Record, StoredItem, StoredObject
    from oai_server.store.sql import SQLStore
    from oai_server.store.url import async_url

    store = SQLStore(async_url(store_url, Path()))
    await store.migrate()
    have = await store.list("chat.completion", "", ListQuery(limit=1, order="desc"))
    start = 0
    if have.data:
        start = int(have.data[0].id.rsplit("-", 1)[1]) + 1
    now = time.time_ns() // 1000
    for first in range(start, rows, 1000):
        batch = []
        for i in range(first, min(first + 1000, rows)):
            cid = f"chatcmpl-bench-{i:07d}"
            body = {
                "id": cid, "object": "chat.completion", "created": now // 1_000_000,
                "model": MODEL,
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": f"answer {i}",
                                         "refusal": None}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            }  # fmt: skip
            obj = StoredObject(
                id=cid, kind="chat.completion", owner="", created_at=now - (rows - i) * 1000,
                body=body, model=MODEL, metadata={"user": f"u{i % users}", "env": "bench"},
            )  # fmt: skip
            message = StoredItem(f"{cid}-0", "message", {"role": "user", "content": f"q {i}"})
            batch.append(Record(obj, [message]))
        await store.put(batch)
    await store.close()


async def _time_lists(base: str, queries: int, users: int) -> list[float]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        times = []
        for q in range(queries):
            params = {"metadata[user]": f"u{(q * 7919) % users}", "limit": "20"}
            if q % 2:
                params["order"] = "desc"
            began = time.perf_counter()
            response = await client.get("/v1/chat/completions", params=params)
            times.append(time.perf_counter() - began)
            response.raise_for_status()
            if len(response.json()["data"]) != 20:
                raise RuntimeError("a filtered page came back short")
        return times


def _list(args: argparse.Namespace) -> int:

    began = time.perf_counter()
    asyncio.run(_seed(args.store_url, args.rows, args.users))
    seeded = time.perf_counter() - began
    with serving(fake_app(args.store_url, token_delay=0.0)) as base:
        asyncio.run(_time_lists(base, 20, args.users))  # warm-up
        times = asyncio.run(_time_lists(base, args.queries, args.users))
    print(f"store list: {args.store_url.split(':')[0]}, {args.rows} stored completions "
          f"(seeded in {seeded:.0f} s), metadata[user]= one of {args.users}, limit 20, "
          f"{args.queries} queries over HTTP")  # fmt: skip
    print(f"  {latency_summary(times)}  max {max(times) * 1000:.2f} ms")
    return 0


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "store", help="the cost of store:true and of listing stored completions"
    )
    which = parser.add_subparsers(dest="store_command", required=True)
    cost = which.add_parser("cost", help="latency and throughput with and without store:true")
    add_load_options(cost, store_url="sqlite:///./bench-store/store.db")
    cost.set_defaults(handler=_cost)
    listing = which.add_parser("list", help="metadata-filtered lists over many stored rows")
    listing.add_argument("--store-url", default="sqlite:///./bench-store/list.db")
    listing.add_argument("--rows", type=int, default=100_000)
    listing.add_argument("--users", type=int, default=1000, help="distinct metadata values")
    listing.add_argument("--queries", type=int, default=500)
    listing.set_defaults(handler=_list)
    parser.set_defaults(handler=lambda args: args.handler(args))
