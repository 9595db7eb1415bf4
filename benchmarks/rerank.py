"""`python -m benchmarks rerank`: `/rerank` on ours and on `vllm serve --runner pooling`.

For each model (the embedded embedding model, scored by cosine; and a cross-encoder
directory, `--reranker`, such as the one `tests/rerank/build_test_reranker.py` builds) each
server in turn, one at a time, answers the same 100-document reranks from `--concurrency`
clients at once: pairs scored per second over the whole run, and each request's latency
(p50, p99). Ours serves the embedded chat model beside the pooling model, as shipped;
`vllm serve` the pooling model alone, with the same dtype, eager mode and thread binding.
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

from benchmarks.embeddings import texts
from benchmarks.metrics import percentile
from benchmarks.server_process import ServerProcess, free_port

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

EMBEDDING = "all-minilm-l6-v2"
RERANKER = "test-reranker"
QUERY = "Which engineers measure servers under load before they ship them?"


def _commands(port: int, name: str, model_dir: str, out: Path) -> dict[str, list[str]]:
    ours = [sys.executable, "-m", "oai_server", "--host", "127.0.0.1", "--port", str(port)]
    if name != EMBEDDING:
        models = out / f"rerank-models-{name}.yaml"
        models.write_text(
            "models:\n  - name: smollm2-135m-instruct\n"
            f"  - name: {name}\n    kind: embedding\n    model: {model_dir}\n"
            "    dtype: float32\n"
        )
        ours += ["--models-file", str(models)]
    return {
        "ours": ours,
        "vllm": [
            *(sys.executable, "-m", "benchmarks.vllm_launcher", "serve", model_dir),
            *("--runner", "pooling", "--dtype", "float32", "--enforce-eager"),
            *("--served-model-name", name, "--host", "127.0.0.1", "--port", str(port)),
        ],
    }


async def _load(
    base: str, model: str, documents: int, requests: int, concurrency: int
) -> dict[str, Any]:
    """`requests` reranks of `documents` documents each, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(client: httpx.AsyncClient, i: int) -> None:
        body = {"model": model, "query": QUERY, "documents": texts(documents, i * documents)}
        async with gate:
            began = time.perf_counter()
            reply = await client.post(f"{base}/rerank", json=body)
            latencies.append(time.perf_counter() - began)
        reply.raise_for_status()
        assert len(reply.json()["results"]) == documents

    async with httpx.AsyncClient(timeout=600) as client:
        await one(client, requests)  # warm-up, not counted
        latencies.clear()
        began = time.perf_counter()
        await asyncio.gather(*(one(client, i) for i in range(requests)))
        elapsed = time.perf_counter() - began
    return {
        "pairs_per_s": documents * requests / elapsed,
        "p50_s": percentile(latencies, 50),
        "p99_s": percentile(latencies, 99),
    }


def _measure(args: argparse.Namespace) -> dict[str, Any]:
    from oai_server.models.embedded_embedding import locate_embedding_model

    env = {
        **os.environ,
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    models = {EMBEDDING: str(locate_embedding_model())}
    if args.reranker is not None:
        models[RERANKER] = str(args.reranker)
    results: dict[str, Any] = {}
    for name, model_dir in models.items():
        for label in args.servers:
            port = free_port()
            command = _commands(port, name, model_dir, args.out)[label]
            log = args.out / f"rerank-{label}-{name}.log"
            server = ServerProcess(command, port=port, log_path=log, env=env)
            server.start(timeout_s=args.start_timeout)
            try:
                figures = asyncio.run(
                    _load(server.root_url, name, args.documents, args.requests, args.concurrency)
                )
            finally:
                server.stop()
            results[f"{label} {name}"] = figures
    return results


def _report(results: dict[str, Any]) -> list[str]:
    lines = ["| server, model | pairs/s | p50 (s) | p99 (s) |", "|---|---|---|---|"]
    for key, figures in results.items():
        lines.append(
            f"| {key} | {figures['pairs_per_s']:.0f} | {figures['p50_s']:.2f} "
            f"| {figures['p99_s']:.2f} |"
        )
    return lines


def _command(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    results = _measure(args)
    (args.out / "rerank.json").write_text(json.dumps(results, indent=2))
    print("\n".join(_report(results)))
    return 0


def register(subparsers: Subparsers) -> None:
    summary = "rerank pairs/s and latency against vllm serve --runner pooling"
    parser = subparsers.add_parser("rerank", help=summary, description=summary)
    parser.add_argument(
        "--reranker", type=Path, default=None, help="a cross-encoder directory to measure too"
    )
    parser.add_argument("--servers", nargs="+", default=["ours", "vllm"], choices=["ours", "vllm"])
    parser.add_argument("--documents", type=int, default=100, help="documents per rerank")
    parser.add_argument("--requests", type=int, default=32, help="reranks per server and model")
    parser.add_argument("--concurrency", type=int, default=8, help="reranks in flight")
    parser.add_argument("--start-timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.set_defaults(handler=_command)
