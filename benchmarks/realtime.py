"""`python -m benchmarks realtime`: N Realtime sessions against the same load over SSE.

Each of `--sessions` clients asks one question at once, over a Realtime WebSocket
(`conversation.item.create` + `response.create`, text deltas until `response.done`) or as
a streamed chat completion; transports alternate A B A B for `--rounds` rounds, and the
ratios realtime / SSE are taken within each round (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from benchmarks.metrics import percentile

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


@dataclass(frozen=True)
class Outcome:
    ttft: float
    total: float
    tokens: int


@dataclass(frozen=True)
class Point:
    transport: str
    wall: float
    outcomes: list[Outcome]

    def row(self) -> dict[str, float]:
        ttfts = sorted(o.ttft for o in self.outcomes)
        return {
            "output tok/s": sum(o.tokens for o in self.outcomes) / self.wall,
            "TTFT p50 ms": 1000 * statistics.median(ttfts),
            "TTFT p99 ms": 1000 * (percentile(ttfts, 99) or 0.0),
            "e2e p50 ms": 1000 * statistics.median(o.total for o in self.outcomes),
        }


def _question(i: int) -> str:
    return f"Session {i}: name one colour of the rainbow."


async def _realtime(url: str, model: str, i: int, max_tokens: int, key: str) -> Outcome:
    import websockets

    ws_url = url.replace("http", "ws", 1) + f"/realtime?model={model}"
    headers = {"Authorization": f"Bearer {key}"}
    async with websockets.connect(ws_url, additional_headers=headers, max_size=None) as ws:
        await ws.recv()  # session.created
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": _question(i)}],
        }
        began = time.perf_counter()
        await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
        await ws.send(
            json.dumps({"type": "response.create", "response": {"max_output_tokens": max_tokens}})
        )
        first = None
        while True:
            event = json.loads(await ws.recv())
            if event["type"] == "response.output_text.delta" and first is None:
                first = time.perf_counter() - began
            elif event["type"] == "response.done":
                usage = event["response"].get("usage") or {}
                total = time.perf_counter() - began
                return Outcome(first or total, total, int(usage.get("output_tokens", 0)))
            elif event["type"] == "error":
                raise RuntimeError(event["error"]["message"])


async def _sse(client: httpx.AsyncClient, model: str, i: int, max_tokens: int) -> Outcome:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": _question(i)}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    began = time.perf_counter()
    first = None
    tokens = 0
    async with client.stream("POST", "/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk["choices"] and chunk["choices"][0]["delta"].get("content") and first is None:
                first = time.perf_counter() - began
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    total = time.perf_counter() - began
    return Outcome(first or total, total, tokens)


async def _point(transport: str, run: Callable[[int], Awaitable[Outcome]], sessions: int) -> Point:
    began = time.perf_counter()
    outcomes = await asyncio.gather(*(run(i) for i in range(sessions)))
    return Point(transport, time.perf_counter() - began, list(outcomes))


async def measure(args: argparse.Namespace) -> list[tuple[Point, Point]]:
    """Rounds of (realtime, SSE) points at `args.sessions` concurrent clients."""
    limits = httpx.Limits(max_connections=args.sessions)
    headers = {"Authorization": f"Bearer {args.api_key}"}
    async with httpx.AsyncClient(
        base_url=args.base_url, limits=limits, timeout=600, headers=headers
    ) as client:
        model = args.model or (await client.get("/models")).json()["data"][0]["id"]
        rounds = []
        for _ in range(args.rounds):

            def realtime(i: int) -> Awaitable[Outcome]:
                return _realtime(args.base_url, model, i, args.max_tokens, args.api_key)

            def sse(i: int) -> Awaitable[Outcome]:
                return _sse(client, model, i, args.max_tokens)

            rounds.append(
                (
                    await _point("realtime", realtime, args.sessions),
                    await _point("sse", sse, args.sessions),
                )
            )
        return rounds


def table(rounds: list[tuple[Point, Point]]) -> str:
    """Markdown: each transport's figures per round, and the ratio realtime / SSE."""
    lines = ["| round | transport | output tok/s | TTFT p50 ms | TTFT p99 ms | e2e p50 ms |"]
    lines.append("|---|---|---:|---:|---:|---:|")
    for n, (rt, sse) in enumerate(rounds, 1):
        a, b = rt.row(), sse.row()
        for name, row in (("realtime", a), ("sse", b)):
            lines.append(f"| {n} | {name} | " + " | ".join(f"{v:.1f}" for v in row.values()) + " |")
        ratio = [a[k] / b[k] if b[k] else float("nan") for k in a]
        lines.append(f"| {n} | ratio | " + " | ".join(f"{r:.2f}x" for r in ratio) + " |")
    return "\n".join(lines)


def _command(args: argparse.Namespace) -> int:
    print(table(asyncio.run(measure(args))))
    return 0


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "realtime",
        help="Realtime WebSocket sessions against the same load over SSE",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--model", help="default: the first of /models")
    parser.add_argument("--api-key", default="unused")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.set_defaults(handler=_command)
