"""`cache`: the response cache's hits against its misses, for each backend.

Against a server with the cache on (`--base-url`, e.g. `python -m oai_server
--response-cache memory`), or, by default, our app on the fake engine with a realistic
token delay, started once per backend in a process of its own (`benchmarks.asgi_serve`;
for Redis, a temporary `redis-server` unless `--redis-url` names one).

At each concurrency, a closed loop of streamed greedy requests: misses are distinct
prompts (each answered by the engine, then stored), hits are one prompt asked again
and again after it was stored once. Measured: time to first token (first content
chunk) and requests per second. Without `--base-url`, misses with the cache off are
measured too, for the cost of a miss (wall-clock latency with a realistic engine pace);
its server CPU time is `python -m benchmarks floor --apps ours,ours-cache`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.client import make_client
from benchmarks.server_process import ServerProcess, free_port, running

MODEL = "smollm2-135m-instruct"


def make_app() -> Any:
    """Our app on the fake engine, its cache and token pace from the environment."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    engine = FakeEngine(
        reply=" ".join(["tok"] * 64),
        prefill_delay=float(os.environ.get("BENCH_PREFILL_DELAY", "0.02")),
        token_delay=float(os.environ.get("BENCH_TOKEN_DELAY", "0.01")),
    )
    return create_app(Settings(), engine)


@dataclass
class Sample:
    ttft_s: float
    latency_s: float
    cache: str


def _has_text(line: str, api: str) -> bool:
    """True for an SSE line whose chunk carries generated text (not the role chunk)."""
    if not line.startswith("data: {"):
        return False
    field = '"content":"' if api == "chat" else '"text":"'
    return field in line and field + '"' not in line


async def _one(client: httpx.AsyncClient, api: str, prompt: str, max_tokens: int) -> Sample:
    body: dict[str, Any] = {"model": MODEL, "stream": True, "max_tokens": max_tokens}
    body["temperature"] = 0
    if api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    path = "/chat/completions" if api == "chat" else "/completions"
    began = time.perf_counter()
    first: float | None = None
    async with client.stream("POST", path, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if first is None and _has_text(line, api):
                first = time.perf_counter()
    end = time.perf_counter()
    return Sample((first or end) - began, end - began, response.headers.get("x-cache", "-"))


async def _loop(
    client: httpx.AsyncClient,
    api: str,
    prompts: Iterator[str],
    requests: int,
    concurrency: int,
    max_tokens: int,
) -> tuple[list[Sample], float]:
    samples: list[Sample] = []
    left = requests

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            samples.append(await _one(client, api, next(prompts), max_tokens))

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples, time.perf_counter() - began


def _row(label: str, concurrency: int, samples: list[Sample], wall_s: float) -> dict[str, Any]:
    ttfts = sorted(s.ttft_s for s in samples)
    return {
        "run": label,
        "concurrency": concurrency,
        "requests": len(samples),
        "x-cache": ",".join(sorted({s.cache for s in samples})),
        "ttft_p50_ms": 1000 * statistics.median(ttfts),
        "ttft_p90_ms": 1000 * ttfts[int(0.9 * (len(ttfts) - 1))],
        "latency_p50_ms": 1000 * statistics.median(s.latency_s for s in samples),
        "req_per_s": len(samples) / wall_s,
    }


async def measure(
    base_url: str,
    api: str,
    concurrencies: Sequence[int],
    requests: int,
    max_tokens: int,
    *,
    hits: bool = True,
) -> list[dict[str, Any]]:
    """Rows of misses then hits at each concurrency, against the server at `base_url`."""
    rows: list[dict[str, Any]] = []
    stamp = time.time_ns()
    async with make_client(base_url, max(concurrencies), 600.0, None) as client:
        for concurrency in concurrencies:
            fresh = (f"Question {stamp}-{concurrency}-{i}: what is new?" for i in itertools.count())
            await _loop(client, api, fresh, concurrency, concurrency, max_tokens)  # warm-up
            rows.append(
                _row("miss", concurrency, *await _loop(
                    client, api, fresh, requests, concurrency, max_tokens
                ))
            )  # fmt: skip
            if not hits:
                continue
            same = itertools.repeat(f"Question {stamp}-{concurrency}: what is repeated?")
            await _loop(client, api, same, 1, 1, max_tokens)  # fills the entry
            rows.append(
                _row("hit", concurrency, *await _loop(
                    client, api, same, requests, concurrency, max_tokens
                ))
            )  # fmt: skip
    return rows


def table(backend: str, rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        f"### {backend}",
        "",
        "| run | concurrency | requests | x-cache | TTFT p50 ms | TTFT p90 ms "
        "| latency p50 ms | req/s | hit/miss req/s |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    misses = {r["concurrency"]: r["req_per_s"] for r in rows if r["run"] == "miss"}
    for r in rows:
        ratio = f"{r['req_per_s'] / misses[r['concurrency']]:.1f}x" if r["run"] == "hit" else ""
        lines.append(
            f"| {r['run']} | {r['concurrency']} | {r['requests']} | {r['x-cache']} "
            f"| {r['ttft_p50_ms']:.1f} | {r['ttft_p90_ms']:.1f} | {r['latency_p50_ms']:.1f} "
            f"| {r['req_per_s']:.1f} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _redis(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("cache: redis-server is not installed; pass --redis-url")
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory,
                   "--save", "", "--appendonly", "no"]  # fmt: skip
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def miss_cost(off: Sequence[dict[str, Any]], on: Sequence[dict[str, Any]], backend: str) -> str:
    """Markdown: misses with the cache on against off, at each concurrency."""
    lines = [
        f"### the cost of a miss: {backend} against the cache off",
        "",
        "| concurrency | TTFT p50 on/off | latency p50 on/off | req/s on/off |",
        "|---:|---:|---:|---:|",
    ]
    for a, b in zip(off, (r for r in on if r["run"] == "miss"), strict=True):
        lines.append(
            f"| {a['concurrency']} | {b['ttft_p50_ms'] / a['ttft_p50_ms']:.3f} "
            f"| {b['latency_p50_ms'] / a['latency_p50_ms']:.3f} "
            f"| {b['req_per_s'] / a['req_per_s']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def _run_backend(backend: str, args: argparse.Namespace, log_dir: Path) -> list[dict[str, Any]]:
    port = free_port()
    env = {
        **os.environ,
        "OAI_RESPONSE_CACHE": backend,
        "BENCH_TOKEN_DELAY": str(args.token_delay),
        "BENCH_PREFILL_DELAY": str(args.prefill_delay),
    }
    command = [sys.executable, "-m", "benchmarks.asgi_serve", "--factory",
               "benchmarks.response_cache:make_app", "--port", str(port)]  # fmt: skip
    server = ServerProcess(command, port=port, log_path=log_dir / "cache-server.log", env=env)
    with running(server, timeout_s=120):
        return asyncio.run(
            measure(f"{server.root_url}/v1", args.api, args.concurrency, args.requests,
                    args.max_tokens, hits=backend != "off")
        )  # fmt: skip


def _command(args: argparse.Namespace) -> int:
    out: list[str] = []
    if args.base_url:
        rows = asyncio.run(
            measure(args.base_url, args.api, args.concurrency, args.requests, args.max_tokens)
        )
        out.append(table(args.base_url, rows))
    else:
        log_dir = Path(tempfile.mkdtemp(prefix="cache-bench-"))
        off = _run_backend("off", args, log_dir)
        out.append(table("off", off))
        for backend in args.backends:
            if backend == "redis":
                with _redis(args.redis_url) as url:
                    rows = _run_backend(url, args, log_dir)
            else:
                rows = _run_backend(backend, args, log_dir)
            out.append(table(backend, rows))
            out.append(miss_cost(off, rows, backend))
    print("\n".join(out))
    return 0


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `cache` subcommand."""
    parser = subparsers.add_parser(
        "cache",
        help="response cache: TTFT and requests/s of hits against misses, per backend",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base-url", help="a server with the cache on, e.g. .../v1")
    parser.add_argument(
        "--backends",
        type=lambda text: text.split(","),
        default=["memory", "redis"],
        help="without --base-url: of memory, redis (default: both; the cache off is "
        "always measured too, for the cost of a miss)",
    )
    parser.add_argument("--redis-url", help="a Redis to use (default: start a temporary one)")
    parser.add_argument("--api", choices=("chat", "completions"), default="chat")
    parser.add_argument("--concurrency", type=_ints, default=[1, 32], help="e.g. 1,32")
    parser.add_argument("--requests", type=int, default=200, help="measured requests per run")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--token-delay", type=float, default=0.01, help="fake engine, seconds")
    parser.add_argument("--prefill-delay", type=float, default=0.02, help="fake engine, seconds")
    parser.set_defaults(handler=_command)
