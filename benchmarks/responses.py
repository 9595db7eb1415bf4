"""`responses`: what the Responses API costs over chat completions, and what its state costs.

- `responses stream`: streamed `/v1/responses` (or, `--api messages`, Anthropic's
  `/v1/messages`) against streamed `/v1/chat/completions`
  at a fixed concurrency, on our app with the fake engine (a scripted token delay stands
  in for the model), alternating rounds (A B A B); output tokens per second and TTFT
  (the first text delta) of each, and their ratios.
- `responses encode`: the CPU time per token of encoding Anthropic's streamed message
  (`MessageRun.events` and each event's bytes), in-process over scripted text deltas.
- `responses rebuild`: a chain of `--turns` stored responses, then the context of its
  last one rebuilt from the store (what `previous_response_id` does) `--queries` times,
  inside the server's own event loop; p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx

from benchmarks.inproc import MODEL, add_load_options, fake_app, latency_summary, serving

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _body(kind: str, max_tokens: int, store: bool = False) -> tuple[str, dict[str, object]]:
    if kind == "messages":
        return "/v1/messages", {
            "model": MODEL, "messages": [{"role": "user", "content": "Count for me"}],
            "stream": True, "max_tokens": max_tokens,
        }  # fmt: skip
    if kind == "responses":
        return "/v1/responses", {
            "model": MODEL, "input": "Count for me", "stream": True, "store": store,
            "max_output_tokens": max_tokens,
        }  # fmt: skip
    return "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "Count for me"}],
        "stream": True, "max_tokens": max_tokens,
    }  # fmt: skip


async def _one(
    client: httpx.AsyncClient, kind: str, max_tokens: int, store: bool
) -> tuple[float, int]:
    path, body = _body(kind, max_tokens, store)
    began = time.perf_counter()
    first: float | None = None
    tokens = 0
    async with client.stream("POST", path, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if kind == "responses":
                is_text = '"response.output_text.delta"' in line
            elif kind == "messages":
                is_text = '"text_delta"' in line
            else:
                is_text = line.startswith("data: {") and 'tok"' in line
            if line.startswith("data: ") and is_text:
                tokens += 1
                if first is None:
                    first = time.perf_counter() - began
    return first if first is not None else float("nan"), tokens


async def _round(base: str, kind: str, args: argparse.Namespace) -> dict[str, float]:
    limits = httpx.Limits(max_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as client:
        todo = iter(range(args.requests))
        results: list[tuple[float, int]] = []

        async def worker() -> None:
            for _ in todo:
                results.append(await _one(client, kind, args.max_tokens, args.store))

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        wall = time.perf_counter() - began
    return {
        "ttft_p50_s": statistics.median(r[0] for r in results),
        "tokens_per_s": sum(r[1] for r in results) / wall,
    }


def _stream(args: argparse.Namespace) -> int:

    rounds: dict[str, list[dict[str, float]]] = {"chat": [], args.api: []}
    with serving(
        fake_app(args.store_url, " ".join(["tok"] * args.max_tokens), args.token_delay)
    ) as base:
        asyncio.run(_round(base, "chat", args))  # warm-up
        for _ in range(args.rounds):
            for kind in rounds:
                rounds[kind].append(asyncio.run(_round(base, kind, args)))
    summary = {
        kind: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
        for kind, rs in rounds.items()
    }
    chat, resp = summary["chat"], summary[args.api]
    print(f"{args.api} stream: concurrency {args.concurrency}, {args.requests} requests x "
          f"{args.rounds} rounds, {args.max_tokens} tokens, "
          f"token delay {args.token_delay * 1000:.1f} ms, responses store: "
          f"{str(args.store).lower()}")  # fmt: skip
    for name, row in (("chat", chat), (args.api, resp)):
        print(f"  {name:10} {row['tokens_per_s']:8.0f} tok/s  TTFT p50 "
              f"{row['ttft_p50_s'] * 1000:7.1f} ms")  # fmt: skip
    print(f"  {args.api}/chat: throughput {resp['tokens_per_s'] / chat['tokens_per_s']:.3f}  "
          f"TTFT (chat/{args.api}, higher is better) "
          f"{chat['ttft_p50_s'] / resp['ttft_p50_s']:.3f}")  # fmt: skip
    return 0


async def _chain(base: str, turns: int) -> str:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        previous: str | None = None
        for turn in range(turns):
            body: dict[str, object] = {"model": MODEL, "input": f"turn {turn}"}
            if previous is not None:
                body["previous_response_id"] = previous
            response = await client.post("/v1/responses", json=body)
            response.raise_for_status()
            previous = str(response.json()["id"])
        assert previous is not None
        return previous


async def _time_rebuilds(store_url: str, last: str, queries: int) -> tuple[int, list[float]]:
    from pathlib import Path

    from prometheus_client import CollectorRegistry

    from oai_server.responses.state import ResponseState
    from oai_server.store.metrics import StoreMetrics
    from oai_server.store.service import StoreService
    from oai_server.store.sql import SQLStore
    from oai_server.store.url import async_url

    store = SQLStore(async_url(store_url, Path()))
    state = ResponseState(StoreService(store, StoreMetrics(CollectorRegistry())), "")
    times, count = [], 0
    for _ in range(queries):
        began = time.perf_counter()
        count = len(await state.previous_context(last))
        times.append(time.perf_counter() - began)
    await store.close()
    return count, times


def _rebuild(args: argparse.Namespace) -> int:

    with serving(fake_app(args.store_url, token_delay=0.0)) as base:
        last = asyncio.run(_chain(base, args.turns))
    count, times = asyncio.run(_time_rebuilds(args.store_url, last, args.queries))
    print(f"responses rebuild: {args.store_url.split(':')[0]}, {args.turns} turns "
          f"({count} items), {args.queries} rebuilds")  # fmt: skip
    print(f"  {latency_summary(times)}")
    return 0


def _encode(args: argparse.Namespace) -> int:
    from oai_server.anthropic import sse
    from oai_server.anthropic.stream import MessageRun
    from oai_server.engine.types import TextDelta
    from oai_server.services.events import EventStream

    async def source(items: list[TextDelta]) -> AsyncIterator[TextDelta]:
        for item in items:
            yield item

    async def once() -> float:
        items = [TextDelta(index=0, text=f" tok{i % 50}") for i in range(args.tokens)]
        run = MessageRun.of("msg_bench", MODEL, 5)
        began = time.process_time()
        async for event in run.events(EventStream(source(items), None)):  # type: ignore[arg-type]
            sse.frame_of(event)
        return (time.process_time() - began) / len(items)

    best = min(asyncio.run(once()) for _ in range(args.rounds))
    print(f"messages encode: {best * 1e6:.2f} us CPU per token (best of {args.rounds}, "
          f"{args.tokens} tokens)")  # fmt: skip
    return 0


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "responses", help="streamed /v1/responses against chat; rebuilding a stored context"
    )
    which = parser.add_subparsers(dest="responses_command", required=True)
    stream = which.add_parser("stream", help="throughput and TTFT against chat completions")
    add_load_options(stream, store_url="sqlite:///./bench-store/responses.db")
    stream.add_argument(
        "--store", action="store_true", help="responses with store: true (its cost: run both)"
    )
    stream.add_argument(
        "--api",
        choices=("responses", "messages"),
        default="responses",
        help="what to set against chat: /v1/responses, or Anthropic's /v1/messages",
    )
    stream.set_defaults(handler=_stream)
    encode = which.add_parser("encode", help="CPU per token of Anthropic's stream encoding")
    encode.add_argument("--tokens", type=int, default=20000)
    encode.add_argument("--rounds", type=int, default=7)
    encode.set_defaults(handler=_encode)
    rebuild = which.add_parser("rebuild", help="the context of a long chain, from the store")
    rebuild.add_argument("--store-url", default="sqlite:///./bench-store/chain.db")
    rebuild.add_argument("--turns", type=int, default=20)
    rebuild.add_argument("--queries", type=int, default=500)
    rebuild.set_defaults(handler=_rebuild)
    parser.set_defaults(handler=lambda args: args.handler(args))
