"""`python -m benchmarks lora`: LoRA adapters on ours against `vllm serve --enable-lora`.

Both serve the embedded model with the same four rank-8 adapters (written here, as the tests
write theirs: fixed random weights on every layer's q and v projections) and the same engine
settings (the dtype ours picks on this CPU, eager, `--max-loras 4`, `--max-lora-rank 8`,
every core computing, 1 GiB of KV cache). Both are up at once and loaded one at a time, in
alternating rounds, so the drift of a shared machine falls on both alike.

- Throughput: output tokens/s of `--requests` chat requests (`--concurrency` in flight,
  `--max-tokens` each, `ignore_eos`), all to the base model, then mixed: request i to the
  base model or one of the four adapters, in turn.
- An adapter's first request: the time to the first token of a request to an adapter on
  disk but not loaded yet (ours: `--lora-dir`; vLLM: its filesystem resolver,
  `VLLM_LORA_RESOLVER_CACHE_DIR` with run-time LoRA updating), against the same request to
  a loaded adapter, the server otherwise idle.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.contenders import OURS, VLLM, EngineSettings, contender
from benchmarks.embeddings import texts

# The adapters the real-engine tests write (PEFT layout, nothing downloaded).
from benchmarks.fixtures.lora_adapter import write_adapter
from benchmarks.report import DEFAULT_OUT
from benchmarks.server_process import ServerProcess, free_port

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

SERVED_NAME = "smollm2-135m-instruct"
ADAPTERS = ("ad0", "ad1", "ad2", "ad3")
RANK = 8


def _write_adapters(root: Path, cold: int, model_dir: Path) -> None:
    """The four served adapters under `root/modules`, and `cold` more under `root/dir` for
    first requests (vLLM's resolver wants the engine's `model`, here a path, as their base)."""
    for i, name in enumerate(ADAPTERS):
        write_adapter(root / "modules" / name, seed=i, rank=RANK)
    for i in range(cold):
        path = root / "dir" / f"cold{i}"
        write_adapter(path, seed=100 + i, rank=RANK, base_model=str(model_dir))


def _dtype() -> str:
    """The dtype ours picks for the embedded model on this CPU, given to both."""
    from oai_server.engine.vllm import cpu

    return cpu.plan_kernels("auto", embedded=True, flags=cpu.cpu_flags()).dtype


def _server(name: str, root: Path, args: argparse.Namespace) -> ServerProcess:
    """Server `name` (not started yet) with the adapters under `root`."""
    engine = EngineSettings(dtype=_dtype(), kvcache_space_gib=1)
    modules = [f"{a}={root / 'modules' / a}" for a in ADAPTERS]
    lora = ["--max-loras", "4", "--max-lora-rank", str(RANK), "--max-cpu-loras", "16"]
    if name == OURS:
        lora += ["--lora-dir", str(root / "dir")]
        lora += [flag for module in modules for flag in ("--lora-modules", module)]
    else:
        # vLLM's flag takes its list after one --lora-modules (a second would replace it).
        lora += ["--enable-lora", "--lora-modules", *modules]
    port = free_port()
    server = contender(
        name,
        _model_dir(),
        SERVED_NAME,
        port,
        engine,
        ours_model_dir=None,
        extra_args=lora,
    )
    env = dict(server.env)
    if name == VLLM:
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        env["VLLM_LORA_RESOLVER_CACHE_DIR"] = str(root / "dir")
    return ServerProcess(server.command, port=port, log_path=args.out / f"lora-{name}.log", env=env)


def _model_dir() -> Path:
    """The embedded model's directory in that dtype (converted once, as ours does)."""
    from oai_server.models.embedded_model import ensure_embedded_model
    from oai_server.settings import Settings

    return ensure_embedded_model(Settings().cache_dir, _dtype())


async def _throughput(
    base: str, models: list[str], args: argparse.Namespace, requests: int, offset: int
) -> float:
    """Output tokens/s of `requests` requests, request i to `models[i % len(models)]`, with
    prompts `offset` on (new ones each turn: no prefix-cache hits from the turn before)."""
    gate = asyncio.Semaphore(args.concurrency)
    generated = 0

    async def one(client: httpx.AsyncClient, i: int) -> None:
        nonlocal generated
        async with gate:
            body = {
                "model": models[i % len(models)],
                "messages": [{"role": "user", "content": texts(1, offset + i)[0]}],
                "max_tokens": args.max_tokens,
                "ignore_eos": True,
            }
            response = await client.post(f"{base}/v1/chat/completions", json=body)
            response.raise_for_status()
            generated += response.json()["usage"]["completion_tokens"]

    async with httpx.AsyncClient(timeout=600, trust_env=False) as client:
        began = time.perf_counter()
        await asyncio.gather(*(one(client, i) for i in range(requests)))
        return generated / (time.perf_counter() - began)


async def _ttft(base: str, model: str) -> float:
    """Seconds to the first streamed token of one short request to `model`."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 4,
        "stream": True,
    }
    async with httpx.AsyncClient(timeout=600, trust_env=False) as client:
        began = time.perf_counter()
        async with client.stream("POST", f"{base}/v1/chat/completions", json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                choices = json.loads(line.removeprefix("data: "))["choices"]
                if choices and choices[0]["delta"].get("content"):
                    return time.perf_counter() - began
    raise RuntimeError(f"{model}: no token streamed")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _measure(servers: dict[str, ServerProcess], args: argparse.Namespace) -> dict[str, Any]:
    loads = {"base": [SERVED_NAME], "mixed": [SERVED_NAME, *ADAPTERS]}
    figures: dict[str, list[float]] = {}
    for server in servers.values():
        # Warm-up, not counted: each adapter and the base model once.
        asyncio.run(_throughput(server.root_url, loads["mixed"], args, len(loads["mixed"]), 0))
    turns = itertools.count(1)
    for _ in range(args.rounds):
        for load, models in loads.items():
            offset = next(turns) * args.requests
            for name, server in servers.items():
                value = asyncio.run(
                    _throughput(server.root_url, models, args, args.requests, offset)
                )
                figures.setdefault(f"{name} {load}", []).append(value)
                print(f"{name} {load}: {value:.1f} output tok/s", flush=True)
    for i in range(args.cold):
        for name, server in servers.items():
            # A new adapter each time on each server, then one loaded already.
            figures.setdefault(f"{name} first", []).append(
                asyncio.run(_ttft(server.root_url, f"cold{i}"))
            )
            figures.setdefault(f"{name} loaded", []).append(
                asyncio.run(_ttft(server.root_url, ADAPTERS[i % len(ADAPTERS)]))
            )
    return {"means": {k: _mean(v) for k, v in figures.items()}, "samples": figures}


def _report(means: dict[str, float]) -> list[str]:
    lines = ["| load | ours tok/s | vllm tok/s | ours / vllm |", "|---|---|---|---|"]
    for load in ("base", "mixed"):
        ours, vllm = means[f"ours {load}"], means[f"vllm {load}"]
        lines.append(f"| {load} | {ours:.0f} | {vllm:.0f} | {ours / vllm:.2f}x |")
    lines += [
        "",
        f"mixed / base: ours {means['ours mixed'] / means['ours base']:.2f}x, "
        f"vllm {means['vllm mixed'] / means['vllm base']:.2f}x",
        "",
        "| TTFT (ms) | ours | vllm |",
        "|---|---|---|",
    ]
    for kind in ("first", "loaded"):
        ours, vllm = means[f"ours {kind}"], means[f"vllm {kind}"]
        lines.append(f"| {kind} request to an adapter | {ours * 1000:.0f} | {vllm * 1000:.0f} |")
    return lines


def _command(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    # Stopped by `timeout` or a supervisor: stop both servers on the way out (they run in
    # sessions of their own, so nothing else would).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="lora-bench-") as tmp:
        root = Path(tmp)
        _write_adapters(root, args.cold, _model_dir())
        servers = {name: _server(name, root, args) for name in (OURS, VLLM)}
        try:
            # Both at once: each start is mostly waiting on the other's CPU anyway.
            with ThreadPoolExecutor(len(servers)) as pool:
                starts = [pool.submit(s.start, args.start_timeout) for s in servers.values()]
                for started in starts:
                    started.result()
            results = _measure(servers, args)
        finally:
            for server in servers.values():
                server.stop()
    (args.out / "lora.json").write_text(json.dumps(results, indent=2))
    print("\n".join(_report(results["means"])))
    return 0


def register(subparsers: Subparsers) -> None:
    summary = "four LoRA adapters and the base model mixed, and an adapter's first request"
    parser = subparsers.add_parser("lora", help=summary, description=__doc__)
    parser.add_argument("--requests", type=int, default=96, help="requests per measurement")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--max-tokens", type=int, default=64, help="output tokens per request")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the servers")
    parser.add_argument("--cold", type=int, default=3, help="first requests to new adapters")
    parser.add_argument("--start-timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.set_defaults(handler=_command)
