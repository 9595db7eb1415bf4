"""`python -m benchmarks embeddings`: `/v1/embeddings` against `vllm serve --runner pooling`.

Three servers in turn, each alone on the machine: ours with the chat model alone
(`--embedding-model none`), ours with the chat model and the embedded embedding model (as
shipped), and `vllm serve` on the same embedding directory with the same dtype and thread
binding (the two of ours one after the other, so their chat figures are the closest in time).
For each request batch size (inputs per request) the same texts go to both embedding
servers at the same concurrency: inputs/s, tokens/s and the ratio ours / vLLM. For each
server: seconds to healthy and the PSS of its process tree once idle. On both of ours, the
same chat load (output tokens/s): what an idle embedding engine costs the chat model, with
the CPU its processes took meanwhile; and on ours the chat load again while one client
embeds 32 inputs at a time without pause: what a busy one costs.
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


async def _load(base: str, batch: int, requests: int, concurrency: int) -> dict[str, float]:
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


def _chat_figures(base: str, server_pid: int, requests: int, embeds: bool) -> dict[str, float]:
    """Chat output tokens/s; beside the embedding engine, its CPU meanwhile (% of a core)
    and the chat figure again while it is busy."""
    pids = embedding_engine(server_pid) if embeds else []
    cpu_before = sum(task_cpu_seconds(pid) for pid in pids)
    began = time.perf_counter()
    figures = {"chat_tokens_per_s": asyncio.run(_chat(base, requests, 16))}
    if embeds:
        spent = sum(task_cpu_seconds(pid) for pid in pids) - cpu_before
        figures["idle_embedding_cpu_pct"] = 100 * spent / (time.perf_counter() - began)
        busy = asyncio.run(_chat_while_embedding(base, requests, 16))
        figures["chat_tokens_per_s_embedding_busy"] = busy
    return figures


def _measure(args: argparse.Namespace) -> dict[str, Any]:
    from oai_server.engine.embedded_embedding import locate_embedding_model

    env = {
        **os.environ,
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    results: dict[str, Any] = {}
    port = free_port()
    for label, command in _commands(port, str(locate_embedding_model())).items():
        server = ServerProcess(
            command, port=port, log_path=args.out / f"embeddings-{label}.log", env=env
        )
        server.start(timeout_s=args.start_timeout)
        try:
            time.sleep(2)  # idle: what it holds, not what a request holds
            memory = tree_memory(server.pid)
            entry: dict[str, Any] = {"start_s": server.started_s, "pss_mib": memory.pss_mib}
            if label != "vllm":
                embeds = "chat only" not in label
                entry.update(_chat_figures(server.root_url, server.pid, args.chat_requests, embeds))
            if "chat only" not in label:
                for batch, requests in zip(args.batches, args.requests, strict=True):
                    entry[f"batch {batch}"] = asyncio.run(
                        _load(server.root_url, batch, requests, args.concurrency)
                    )
            results[label] = entry
        finally:
            server.stop()
    return results


def _report(results: dict[str, Any], batches: list[int]) -> list[str]:
    ours, vllm = results["ours"], results["vllm"]
    lines = ["| batch | ours inputs/s | vllm inputs/s | ours tokens/s | vllm tokens/s | ratio |"]
    lines.append("|---|---|---|---|---|---|")
    for batch in batches:
        a, b = ours[f"batch {batch}"], vllm[f"batch {batch}"]
        lines.append(
            f"| {batch} | {a['inputs_per_s']:.0f} | {b['inputs_per_s']:.0f} | "
            f"{a['tokens_per_s']:.0f} | {b['tokens_per_s']:.0f} | "
            f"{a['inputs_per_s'] / b['inputs_per_s']:.2f}x |"
        )
    lines += [
        "",
        "| server | start (s) | PSS idle (MiB) | chat output tok/s |",
        "|---|---|---|---|",
    ]
    for label, entry in results.items():
        chat = entry.get("chat_tokens_per_s")
        lines.append(
            f"| {label} | {entry['start_s']:.1f} | {entry['pss_mib']:.0f} | "
            f"{'-' if chat is None else f'{chat:.0f}'} |"
        )
    alone = results["ours, chat only"]["chat_tokens_per_s"]
    lines += [
        "",
        f"idle embedding engine: chat {ours['chat_tokens_per_s'] / alone:.2f}x of chat alone, "
        f"the engine took {ours['idle_embedding_cpu_pct']:.1f} % of a core meanwhile",
        f"busy embedding engine (32 inputs per request, back to back): chat "
        f"{ours['chat_tokens_per_s_embedding_busy'] / alone:.2f}x of chat alone",
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
    parser.add_argument(
        "--chat-requests", type=int, default=64, help="chat requests (16 in flight) per server"
    )
    parser.add_argument("--start-timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.set_defaults(handler=_command)
