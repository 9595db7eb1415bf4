"""`python -m benchmarks quality`: are the answers right, and how fast, per dtype and kernel path.

Each configuration is one start of our server (`python -m oai_server`, the embedded model)
with its own flags and environment. It is asked the factual questions of `data/facts.jsonl`
one at a time, greedily, through the chat endpoint with the model's own template (and so the
default system message the template adds), `max_tokens` bounded; an answer scores when it
contains one of the expected answers as a word, case-insensitively. Then one throughput
point: `--concurrency` requests of `--output-len` tokens at once (`ignore_eos`), output
tokens per second. With `--rounds 2` the configurations run A B A B, and the table gives
each one's median tok/s: compare ratios within one run, never across runs.

    python -m benchmarks quality                    # bf16 and float32 x oneDNN ISA caps
    python -m benchmarks quality --config fp32=--dtype=float32 --config bf16=--dtype=bfloat16
    python -m benchmarks quality --config preload=--cpu-preload --config none=--no-cpu-preload
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.proc_stats import tree_cpu_seconds
from benchmarks.report import DEFAULT_OUT, run_stamp
from benchmarks.server_process import ServerProcess, free_port, running

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

FACTS = Path(__file__).with_name("data") / "facts.jsonl"

# dtype x the matmul paths reachable without AMX: oneDNN's ISA capped (bf16 emulated on
# AVX512_CORE and AVX2, as on CPUs without avx512_bf16); attention is "vec" in all of them.
DEFAULT_CONFIGS = (
    "bf16=--dtype=bfloat16",
    "bf16-avx512=ONEDNN_MAX_CPU_ISA=AVX512_CORE --dtype=bfloat16",
    "bf16-avx2=ONEDNN_MAX_CPU_ISA=AVX2 --dtype=bfloat16",
    "fp32=--dtype=float32",
    "fp32-avx2=ONEDNN_MAX_CPU_ISA=AVX2 --dtype=float32",
)


@dataclass(frozen=True)
class Fact:
    id: str
    question: str
    answers: tuple[str, ...]

    def is_answered_by(self, text: str) -> bool:
        """Whether `text` names one of the answers as a whole word, ignoring case."""
        return any(
            re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", text, re.IGNORECASE)
            for answer in self.answers
        )


def load_facts(path: Path = FACTS) -> list[Fact]:
    facts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            facts.append(Fact(row["id"], row["question"], tuple(row["answers"])))
    return facts


@dataclass(frozen=True)
class Config:
    """One server start: a label, environment variables and flags for `python -m oai_server`."""

    label: str
    flags: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Config:
        """`LABEL=[NAME=VALUE ...] [--flag ...]`."""
        label, sep, rest = spec.partition("=")
        if not sep or not label or label.startswith("-"):
            raise argparse.ArgumentTypeError(f"expected LABEL=[NAME=VALUE ...] FLAGS, got {spec!r}")
        flags: list[str] = []
        env: list[tuple[str, str]] = []
        for word in rest.split():
            name, is_env, value = word.partition("=")
            if is_env and not word.startswith("-"):
                env.append((name, value))
            else:
                flags.append(word)
        return cls(label, tuple(flags), tuple(env))

    def describe(self) -> str:
        return " ".join([*(f"{k}={v}" for k, v in self.env), *self.flags])


@dataclass
class Result:
    config: Config
    score: int = 0
    total: int = 0
    dtype: str = "?"
    wrong: list[dict[str, str]] = field(default_factory=list)
    tok_per_s: list[float] = field(default_factory=list)
    tok_per_cpu_s: list[float] = field(default_factory=list)
    started_s: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return {
            "config": self.config.label,
            "flags": self.config.describe(),
            "dtype": self.dtype,
            "score": self.score,
            "total": self.total,
            "output_tok_per_s": [round(v, 1) for v in self.tok_per_s],
            "median_tok_per_s": round(statistics.median(self.tok_per_s), 1)
            if self.tok_per_s
            else None,
            "output_tok_per_cpu_s": [round(v, 1) for v in self.tok_per_cpu_s],
            "start_s": [round(v, 1) for v in self.started_s],
            "wrong": self.wrong,
        }


async def ask(client: httpx.AsyncClient, model: str, question: str, max_tokens: int) -> str:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": question}],
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    response = await client.post("/v1/chat/completions", json=body)
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"] or "")


async def score(
    client: httpx.AsyncClient, model: str, facts: Sequence[Fact], max_tokens: int, result: Result
) -> None:
    result.score, result.total, result.wrong = 0, len(facts), []
    for fact in facts:  # one at a time: greedy answers do not depend on the batch
        text = await ask(client, model, fact.question, max_tokens)
        if fact.is_answered_by(text):
            result.score += 1
        else:
            result.wrong.append({"id": fact.id, "answer": text})


async def throughput(
    client: httpx.AsyncClient, model: str, concurrency: int, output_len: int
) -> tuple[int, float]:
    """Output tokens and wall seconds of `concurrency` requests of `output_len` tokens at once."""

    async def one(index: int) -> int:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": f"Tell me a long story, number {index}."}],
            "temperature": 0,
            "max_tokens": output_len,
            "ignore_eos": True,
        }
        response = await client.post("/v1/chat/completions", json=body)
        response.raise_for_status()
        return int(response.json()["usage"]["completion_tokens"])

    began = time.perf_counter()
    tokens = await asyncio.gather(*(one(i) for i in range(concurrency)))
    return sum(tokens), time.perf_counter() - began


async def measure(server: ServerProcess, args: argparse.Namespace, result: Result) -> None:
    limits = httpx.Limits(max_connections=args.concurrency + 4)
    async with httpx.AsyncClient(
        base_url=server.root_url, timeout=600.0, limits=limits, trust_env=False
    ) as client:
        model = (await client.get("/v1/models")).json()["data"][0]["id"]
        if args.score and not result.total:  # greedy: the same answers in every round
            await score(client, model, load_facts(args.facts), args.max_tokens, result)
        await throughput(client, model, 4, 8)  # warm-up
        cpu_before = tree_cpu_seconds(server.pid)
        tokens, seconds = await throughput(client, model, args.concurrency, args.output_len)
        cpu_s = tree_cpu_seconds(server.pid) - cpu_before
        result.tok_per_s.append(tokens / seconds)
        # On a shared machine wall time is what others leave over; CPU time is the cost.
        result.tok_per_cpu_s.append(tokens / cpu_s if cpu_s > 0 else 0.0)


def engine_dtype(log_path: Path) -> str:
    """The dtype the server's engine reported in its log."""
    text = log_path.read_text(encoding="utf-8", errors="replace")
    match = re.search(r"\bdtype=(?:torch\.)?(\w+)", text)
    return match.group(1) if match else "?"


def run(args: argparse.Namespace) -> list[Result]:
    results = [Result(config) for config in args.config]
    for round_index in range(args.rounds):
        for result in results:
            port = free_port()
            command = [sys.executable, "-m", "oai_server", "--port", str(port), "--log-level"]
            command += ["debug", "--embedding-model", "none", *result.config.flags]
            log = args.out / "logs" / f"quality-{result.config.label}-{round_index}.log"
            env = {**os.environ, **dict(result.config.env)}
            server = ServerProcess(command, port=port, log_path=log, env=env)
            with running(server, args.start_timeout):
                result.started_s.append(server.started_s or 0.0)
                asyncio.run(measure(server, args, result))
            result.dtype = engine_dtype(log)
            print(_line(result), file=sys.stderr)
    return results


def _line(result: Result) -> str:
    last = result.tok_per_s[-1] if result.tok_per_s else 0.0
    per_cpu = result.tok_per_cpu_s[-1] if result.tok_per_cpu_s else 0.0
    return (
        f"{result.config.label}: dtype {result.dtype}, {result.score}/{result.total} right, "
        f"{last:.1f} output tok/s, {per_cpu:.1f} per CPU-second"
    )


def table(results: Sequence[Result]) -> str:
    def median(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    base = median(results[0].tok_per_cpu_s)
    lines = [
        "| config | flags | dtype | right | output tok/s | tok per CPU-s | vs first (CPU) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        per_cpu = median(r.tok_per_cpu_s)
        ratio = f"{per_cpu / base:.2f}x" if base else "-"
        lines.append(
            f"| {r.config.label} | `{r.config.describe()}` | {r.dtype} | "
            f"{r.score}/{r.total} | {median(r.tok_per_s):.1f} | {per_cpu:.1f} | {ratio} |"
        )
    return "\n".join(lines)


def register(subparsers: Subparsers) -> None:
    summary = "score factual answers and measure tok/s per server configuration"
    parser = subparsers.add_parser("quality", help=summary, description=summary)
    parser.add_argument(
        "--config",
        type=Config.parse,
        action="append",
        metavar="LABEL=FLAGS",
        help="a configuration: label and oai_server flags (repeatable; default: "
        + "; ".join(DEFAULT_CONFIGS)
        + ")",
    )
    parser.add_argument("--facts", type=Path, default=FACTS)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--score",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask the factual questions (--no-score: throughput only)",
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=1, help="A B rounds (default: 1)")
    parser.add_argument("--start-timeout", type=float, default=240.0, metavar="S")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    if not args.config:
        args.config = [Config.parse(spec) for spec in DEFAULT_CONFIGS]
    results = run(args)
    print(table(results))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"quality-{run_stamp()}.json"
    path.write_text(json.dumps([r.row() for r in results], indent=2) + "\n", encoding="utf-8")
    print(f"saved {path}", file=sys.stderr)
    return 0
