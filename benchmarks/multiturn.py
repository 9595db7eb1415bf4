"""`multiturn`: conversations that come back, against any set of replicas.

N conversations run at once, each T turns in a row; every conversation has a system prompt
of its own (about `--system-tokens` tokens) and resends its whole history each turn, as a
chat client does. Measured: the share of prompt tokens the engines' prefix caches served
(`usage.prompt_tokens_details.cached_tokens`), time to first token p50/p99 (also apart for
the requests whose prompt was mostly computed and those mostly served from cache), and how
many replicas (`x-replica`) each conversation touched. Run it against one replica, Serve's
default router and `ray_router: affinity` in turn, and compare the ratios:

    python -m benchmarks multiturn --base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.client import discover_model, make_client
from benchmarks.inproc import latency_summary

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


@dataclass
class Tally:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    ttft_s: list[float] = field(default_factory=list)
    # The same TTFTs apart: prompts the engine mostly computed (a cache miss), the rest.
    computed_ttft_s: list[float] = field(default_factory=list)
    cached_ttft_s: list[float] = field(default_factory=list)
    replicas: list[set[str]] = field(default_factory=list)
    requests_per_replica: Counter[str] = field(default_factory=Counter)

    def add(self, ttft: float, prompt_tokens: int, cached_tokens: int) -> None:
        self.ttft_s.append(ttft)
        self.prompt_tokens += prompt_tokens
        self.cached_tokens += cached_tokens
        mostly_cached = 2 * cached_tokens >= prompt_tokens
        (self.cached_ttft_s if mostly_cached else self.computed_ttft_s).append(ttft)


def system_prompt(conversation: int, tokens: int, tag: str = "") -> str:
    """About `tokens` tokens of instructions, different from the first word on.

    `tag` makes the prompts of one run differ from another's, so a run against replicas
    that served an earlier one finds nothing of it in their caches.
    """
    # About 8 tokens a rule under a Llama-style tokenizer; the tag only once, at the start.
    rules = [f"Rule {i}: answer politely." for i in range(tokens // 8)]
    return " ".join([f"You serve shop {tag}-{conversation}.", *rules])


async def _turn(http: httpx.AsyncClient, body: dict[str, Any], tally: Tally, seen: set[str]) -> str:
    began = time.perf_counter()
    ttft = 0.0
    prompt_tokens = cached_tokens = 0
    text: list[str] = []
    async with http.stream("POST", "/chat/completions", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            raise RuntimeError(f"HTTP {response.status_code}: {response.text}")
        replica = response.headers.get("x-replica", "-")
        seen.add(replica)
        tally.requests_per_replica[replica] += 1
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            for choice in chunk["choices"]:
                if choice["delta"].get("content"):
                    if not text:
                        ttft = time.perf_counter() - began
                    text.append(choice["delta"]["content"])
            usage = chunk.get("usage")
            if usage:
                prompt_tokens = usage["prompt_tokens"]
                details = usage.get("prompt_tokens_details") or {}
                cached_tokens = details.get("cached_tokens") or 0
    tally.add(ttft, prompt_tokens, cached_tokens)
    return "".join(text)


async def _conversation(
    http: httpx.AsyncClient, args: argparse.Namespace, model: str, index: int, tally: Tally
) -> None:
    system = system_prompt(index, args.system_tokens, args.tag)
    messages = [{"role": "system", "content": system}]
    seen: set[str] = set()
    for turn in range(args.turns):
        messages.append({"role": "user", "content": f"Question {turn}: what do you sell?"})
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": args.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if args.prompt_cache_key:
            body["prompt_cache_key"] = f"conversation-{index}"
        answer = await _turn(http, body, tally, seen)
        messages.append({"role": "assistant", "content": answer})
    tally.replicas.append(seen)


async def run(args: argparse.Namespace) -> Tally:
    """The workload of `args` (the subcommand's options) against `args.base_url`."""
    tally = Tally()
    async with make_client(args.base_url, args.conversations, 600, args.api_key) as http:
        model = args.model or await discover_model(http)
        await asyncio.gather(
            *(_conversation(http, args, model, i, tally) for i in range(args.conversations))
        )
    return tally


def cached_share(tally: Tally) -> float:
    return tally.cached_tokens / max(tally.prompt_tokens, 1)


def _summary(seconds: list[float]) -> str:
    return latency_summary(seconds) if seconds else "-"


def describe(tally: Tally) -> list[str]:
    """The run's figures, a line each."""
    spread = statistics.mean(len(r) for r in tally.replicas)
    replicas = len(set().union(*tally.replicas))
    share = cached_share(tally)
    computed, cached = tally.computed_ttft_s, tally.cached_ttft_s
    return [
        f"  cached share {share:.3f} ({tally.cached_tokens}/{tally.prompt_tokens} prompt tokens)",
        f"  TTFT {latency_summary(tally.ttft_s)}",
        f"  mostly computed, {len(computed)} prompts: TTFT {_summary(computed)}",
        f"  mostly cached, {len(cached)} prompts: TTFT {_summary(cached)}",
        f"  replicas: {replicas} in all, {spread:.2f} per conversation on average, "
        f"requests on each {sorted(tally.requests_per_replica.values(), reverse=True)}",
    ]


def _command(args: argparse.Namespace) -> int:
    tally = asyncio.run(run(args))
    shape = f"{args.conversations} conversations x {args.turns} turns"
    print(f"multiturn: {shape}, ~{args.system_tokens}-token system prompts")
    print("\n".join(describe(tally)))
    return 0


def add_workload_options(parser: argparse.ArgumentParser) -> None:
    """The workload's shape (shared with `replicas`, which stands the servers up itself)."""
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--model", default=None, help="default: the first the server lists")
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--system-tokens", type=int, default=500)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument(
        "--prompt-cache-key", action="store_true", help="send one prompt_cache_key per conversation"
    )
    parser.add_argument(
        "--tag",
        default=secrets.token_hex(4),
        help="put in every system prompt, so no earlier run's cache serves this one "
        "(default: random)",
    )


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "multiturn", help="multi-turn conversations: prefix-cache share and TTFT across replicas"
    )
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    add_workload_options(parser)
    parser.set_defaults(handler=_command)
