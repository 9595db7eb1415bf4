"""`python -m benchmarks embeddings`: `/v1/embeddings` against `vllm serve --runner pooling`.

Ours with the chat model and the embedded embedding model (as shipped) runs throughout;
beside it first ours with the chat model alone (`--embedding-model none`), then `vllm serve`
on the same embedding directory with the same dtype and thread binding. Two servers are up
at once but only one is loaded at a time, in alternating rounds, so the drift of a shared
machine falls on both alike (an idle server costs the loaded one about 1 % of a core).

- Chat rounds: the same chat load (output tokens/s) on ours alone, on ours beside the idle
  embedding engine (with the CPU that engine took meanwhile), and beside it busy (one client
  embedding 32 inputs per request without pause).
- Embedding rounds: for each request batch size (inputs per request) the same texts to ours
  and to vLLM at the same concurrency: inputs/s, tokens/s, the ratio ours / vLLM of each
  round (reported as median and range), and the CPU seconds per 1000 inputs of each
  server's front process and of its engine processes, which a shared machine's drift moves
  far less than inputs/s and which say where the time goes.
- For each server: seconds to healthy and the PSS of its process tree once idle.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.proc_stats import PROC, process_tree, task_cpu_seconds, tree_memory
from benchmarks.server_process import ServerProcess, free_port

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

NAME = "all-minilm-l6-v2"
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "rivers",
    "run",
    "to",
    "the",
    "sea",
    "and",
    "engineers",
    "measure",
    "servers",
    "under",
    "load",
    "before",
    "they",
    "ship",
    "them",
    "to",
    "users",
]


def texts(count: int, offset: int = 0) -> list[str]:
    """`count` distinct sentences of 12 to 40 words (about 15 to 45 tokens)."""
    return [
        f"Sentence {offset + i}: "
        + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(12 + i % 29))
        for i in range(count)
    ]


def _commands(port: int, model_dir: str) -> dict[str, list[str]]:
    ours = [sys.executable, "-m", "oai_server", "--host", "127.0.0.1", "--port", str(port)]
    return {
        "ours, chat only": [*ours, "--embedding-model", "none"],
        "ours": [*ours, "--embedding-model", NAME],
        "vllm": [
            *(sys.executable, "-m", "benchmarks.vllm_launcher", "serve", model_dir),
            *("--runner", "pooling", "--dtype", "float32", "--enforce-eager"),
            *("--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(port)),
        ],
    }


async def _load(base: str, batch: int, requests: int, concurrency: int) -> Figures:
    """`requests` requests of `batch` inputs each, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)
    tokens = 0

    async def one(client: httpx.AsyncClient, i: int) -> None:
        nonlocal tokens
        async with gate:
            body = {"model": NAME, "input": texts(batch, i * batch), "encoding_format": "float"}
            response = await client.post(f"{base}/v1/embeddings", json=body)
            response.raise_for_status()
            tokens += response.json()["usage"]["prompt_tokens"]

    async with httpx.AsyncClient(timeout=600, trust_env=False) as client:
        await one(client, requests)  # warm-up, not counted
        tokens = 0
        began = time.perf_counter()
        await asyncio.gather(*(one(client, i) for i in range(requests)))
        took = time.perf_counter() - began
    return {"inputs_per_s": batch * requests / took, "tokens_per_s": tokens / took}


async def _chat(base: str, requests: int, concurrency: int) -> float:
    """Output tokens/s of `requests` chat requests of 64 tokens each, `concurrency` at once."""
    gate = asyncio.Semaphore(concurrency)
    generated = 0

    async def one(client: httpx.AsyncClient, i: int) -> None:
        nonlocal generated
        async with gate:
            body = {
                "model": "smollm2-135m-instruct",
                "messages": [{"role": "user", "content": texts(1, i)[0]}],
                "max_tokens": 64,
                "ignore_eos": True,
            }
            response = await client.post(f"{base}/v1/chat/completions", json=body)
            response.raise_for_status()
            generated += response.json()["usage"]["completion_tokens"]

    async with httpx.AsyncClient(timeout=600, trust_env=False) as client:
        await one(client, requests)  # warm-up, not counted
        generated = 0
        began = time.perf_counter()
        await asyncio.gather(*(one(client, i) for i in range(requests)))
        return generated / (time.perf_counter() - began)


async def _chat_while_embedding(base: str, requests: int, concurrency: int) -> float:
    """`_chat`'s figure while one client embeds 32 inputs per request, back to back."""
    stop = asyncio.Event()

    async def embed() -> None:
        async with httpx.AsyncClient(timeout=600, trust_env=False) as client:
            i = 0
            while not stop.is_set():
                body = {"model": NAME, "input": texts(32, i * 32), "encoding_format": "float"}
                (await client.post(f"{base}/v1/embeddings", json=body)).raise_for_status()
                i += 1

    embedding = asyncio.create_task(embed())
    try:
        return await _chat(base, requests, concurrency)
    finally:
        stop.set()
        await embedding


def _start_ticks(pid: int) -> int:
    """When process `pid` started, in clock ticks since boot (field 22 of its stat)."""
    text = (PROC / str(pid) / "stat").read_text()
    return int(text.rsplit(")", 1)[1].split()[19])


def embedding_engine(server_pid: int) -> list[int]:
    """The embedding engine's processes in our server: the engine core started last (the
    chat engine loads first, see `oai_server.app`) and its children."""
    cores = [
        pid
        for pid in process_tree(server_pid)
        if (PROC / str(pid) / "comm").read_text().startswith("VLLM::EngineCor")
    ]
    return process_tree(max(cores, key=_start_ticks))


Figures = dict[str, float]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def ratios(ours: list[float], theirs: list[float]) -> list[float]:
    """Each round's ratio ours / theirs, sorted: the median and the spread of a run."""
    return sorted(a / b for a, b in zip(ours, theirs, strict=True))


def spread(values: list[float]) -> str:
    """`median (min-max)` of per-round ratios, e.g. `1.02x (0.97-1.08)`."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return f"{median:.2f}x ({ordered[0]:.2f}-{ordered[-1]:.2f})"


def _chat_rounds(
    alone: ServerProcess, both: ServerProcess, args: argparse.Namespace
) -> dict[str, list[float]]:
    """Chat output tokens/s on each of ours, round after round (drift falls on both alike):
    alone; beside the idle embedding engine, with that engine's CPU meanwhile (% of a
    core); beside the busy one."""
    pids = embedding_engine(both.pid)
    figures: dict[str, list[float]] = {"alone": [], "idle": [], "idle_cpu_pct": [], "busy": []}
    for _ in range(args.rounds):
        figures["alone"].append(asyncio.run(_chat(alone.root_url, args.chat_requests, 16)))
        cpu_before, began = sum(task_cpu_seconds(pid) for pid in pids), time.perf_counter()
        figures["idle"].append(asyncio.run(_chat(both.root_url, args.chat_requests, 16)))
        spent = sum(task_cpu_seconds(pid) for pid in pids) - cpu_before
        figures["idle_cpu_pct"].append(100 * spent / (time.perf_counter() - began))
        busy = _chat_while_embedding(both.root_url, args.chat_requests, 16)
        figures["busy"].append(asyncio.run(busy))
    return figures


def _cpu_seconds(server: ServerProcess) -> tuple[float, float]:
    """CPU seconds so far of the server's own process (the front: HTTP, tokenizing, the
    engine client) and of its descendants (the engines' core and worker processes)."""
    front = task_cpu_seconds(server.pid)
    engines = sum(task_cpu_seconds(pid) for pid in process_tree(server.pid)[1:])
    return front, engines


def _measured_load(server: ServerProcess, batch: int, requests: int, concurrency: int) -> Figures:
    """`_load`'s figures, and the CPU each side of the server spent per 1000 inputs: on a
    shared machine CPU per input drifts far less than inputs/s, and says where time goes."""
    front, engines = _cpu_seconds(server)
    figures = asyncio.run(_load(server.root_url, batch, requests, concurrency))
    inputs = batch * (requests + 1)  # the warm-up's too: it ran inside the window
    front_after, engines_after = _cpu_seconds(server)
    figures["front_cpu_s_per_1k"] = 1000 * (front_after - front) / inputs
    figures["engine_cpu_s_per_1k"] = 1000 * (engines_after - engines) / inputs
    return figures


def _embedding_rounds(
    ours: ServerProcess, vllm: ServerProcess, args: argparse.Namespace
) -> dict[str, dict[str, list[float]]]:
    """Per batch size, each round's figures on ours and on vLLM, loaded in turns (A B A B),
    so each round's ratio compares two runs minutes apart at most."""
    rounds: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.rounds):
        for batch, requests in zip(args.batches, args.requests, strict=True):
            for label, server in (("ours", ours), ("vllm", vllm)):
                figures = _measured_load(server, batch, requests, args.concurrency)
                entry = rounds.setdefault(f"{label} batch {batch}", {})
                for name, value in figures.items():
                    entry.setdefault(name, []).append(value)
    return rounds


def _start(label: str, args: argparse.Namespace, env: dict[str, str]) -> ServerProcess:
    from oai_server.models.embedded_embedding import locate_embedding_model

    port = free_port()
    command = _commands(port, str(locate_embedding_model()))[label]
    log = args.out / f"embeddings-{label}.log"
    server = ServerProcess(command, port=port, log_path=log, env=env)
    server.start(timeout_s=args.start_timeout)
    return server


def _measure(args: argparse.Namespace) -> dict[str, Any]:
    """Ours with the embedding engine throughout; beside it ours without one (the chat
    rounds), then `vllm serve` (the embedding rounds). An idle server costs the other
    about 1 % of a core (measured: `idle_embedding_cpu_pct`)."""
    env = {
        **os.environ,
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    results: dict[str, Any] = {}
    started: list[ServerProcess] = []

    def start(label: str) -> ServerProcess:
        server = _start(label, args, env)
        started.append(server)
        time.sleep(2)  # idle: what it holds, not what a request holds
        results[label] = {"start_s": server.started_s, "pss_mib": _idle_pss(server)}
        return server

    try:
        both = start("ours")
        alone = start("ours, chat only")
        chat = _chat_rounds(alone, both, args)
        results["chat rounds"] = chat
        alone.stop()
        vllm = start("vllm")
        results.update(_embedding_rounds(both, vllm, args))
    finally:
        for server in started:
            server.stop()
    return results


def _idle_pss(server: ServerProcess) -> float:
    return tree_memory(server.pid).pss_mib


def _report(results: dict[str, Any], batches: list[int]) -> list[str]:
    lines = [
        "| batch | ours inputs/s | vllm inputs/s | ours tokens/s | vllm tokens/s "
        "| ratio, median of rounds (range) | CPU s per 1k inputs, ours front + engines "
        "| vllm front + engine |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for batch in batches:
        a, b = results[f"ours batch {batch}"], results[f"vllm batch {batch}"]
        lines.append(
            f"| {batch} | {_mean(a['inputs_per_s']):.0f} | {_mean(b['inputs_per_s']):.0f} | "
            f"{_mean(a['tokens_per_s']):.0f} | {_mean(b['tokens_per_s']):.0f} | "
            f"{spread(ratios(a['inputs_per_s'], b['inputs_per_s']))} | "
            f"{_mean(a['front_cpu_s_per_1k']):.2f} + {_mean(a['engine_cpu_s_per_1k']):.2f} | "
            f"{_mean(b['front_cpu_s_per_1k']):.2f} + {_mean(b['engine_cpu_s_per_1k']):.2f} |"
        )
    lines += ["", "| server | start (s) | PSS idle (MiB) |", "|---|---|---|"]
    for label in ("ours", "ours, chat only", "vllm"):
        entry = results[label]
        lines.append(f"| {label} | {entry['start_s']:.1f} | {entry['pss_mib']:.0f} |")
    chat = results["chat rounds"]
    lines += [
        "",
        f"chat output tok/s: alone {_mean(chat['alone']):.0f}, beside the idle embedding "
        f"engine {_mean(chat['idle']):.0f} ({spread(ratios(chat['idle'], chat['alone']))}; "
        f"the engine took {_mean(chat['idle_cpu_pct']):.1f} % of a core meanwhile), beside "
        f"the busy one {_mean(chat['busy']):.0f} ({spread(ratios(chat['busy'], chat['alone']))})",
    ]
    return lines


def _command(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    results = _measure(args)
    (args.out / "embeddings.json").write_text(json.dumps(results, indent=2))
    print("\n".join(_report(results, args.batches)))
    return 0


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


def register(subparsers: Subparsers) -> None:
    summary = "embeddings throughput, start-up and PSS against vllm serve --runner pooling"
    parser = subparsers.add_parser("embeddings", help=summary, description=summary)
    parser.add_argument("--batches", type=_ints, default=[1, 32, 256], help="inputs per request")
    parser.add_argument(
        "--requests", type=_ints, default=[256, 16, 4], help="requests per batch size"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the servers")
    parser.add_argument(
        "--chat-requests", type=int, default=64, help="chat requests (16 in flight) per server"
    )
    parser.add_argument("--start-timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.set_defaults(handler=_command)
