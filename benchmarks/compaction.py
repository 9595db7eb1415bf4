"""`compaction`: what a long `previous_response_id` chain costs with and without compaction.

A chain of `--turns` turns, on our app with the fake engine: each answer `--answer`
tokens, each summary `--summary` tokens, `--delay` seconds a token. Run once as is and
once with `context_management: [{"type": "compaction", "compact_threshold": N}]`; for
each: the input tokens of the chain's turns in all (what prefill and the KV cache grow
with on a real engine: the fake's prompt tokens are the prompt's bytes) and the last
turn's, every prompt token the engine read (the summarising passes' included), and the
wall time (the fake's time grows with output tokens only, not with prompts).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.inproc import MODEL, serving

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _app(store_url: str, args: argparse.Namespace) -> tuple[Any, Any]:
    """The app, and its fake engine (whose calls are every prompt it read)."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.responses.compaction import INSTRUCTION
    from oai_server.settings import Settings

    def reply(prompt: str) -> str:
        words = args.summary if INSTRUCTION in prompt else args.answer
        return " ".join(["word"] * words)

    engine = FakeEngine(reply_for=reply, token_delay=args.delay, max_model_len=131_072)
    return create_app(Settings(store_url=store_url, log_level="warning"), engine), engine


async def _chain(base: str, turns: int, threshold: int | None) -> dict[str, float]:
    extra: dict[str, Any] = {}
    if threshold is not None:
        extra["context_management"] = [{"type": "compaction", "compact_threshold": threshold}]
    previous: str | None = None
    read = last = compactions = 0
    began = time.perf_counter()
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        for turn in range(turns):
            body = {"model": MODEL, "input": f"Step {turn}: go on.", "max_output_tokens": 512}
            body |= extra
            if previous is not None:
                body["previous_response_id"] = previous
            answer = (await client.post("/v1/responses", json=body)).json()
            previous = answer["id"]
            last = answer["usage"]["input_tokens"]
            read += last
            items = await client.get(f"/v1/responses/{previous}/input_items")
            compactions += sum(i["type"] == "compaction" for i in items.json()["data"])
    return {
        "seconds": time.perf_counter() - began,
        "read": read,
        "last": last,
        "compactions": compactions,
    }


def _run(args: argparse.Namespace) -> int:
    results = {}
    for label, threshold in (("without", None), ("with", args.threshold)):
        with tempfile.TemporaryDirectory() as tmp:
            store = f"sqlite:///{Path(tmp) / 'store.db'}"
            app, engine = _app(store, args)
            with serving(app) as base:
                results[label] = asyncio.run(_chain(base, args.turns, threshold))
            # Every prompt the engine read: the turns' and the summarising passes'.
            results[label]["engine"] = sum(len(c.prompt_token_ids) for c in engine.calls)
    print(
        f"compaction: {args.turns} turns, answers of {args.answer} tokens, summaries of "
        f"{args.summary}, {args.delay * 1000:.0f} ms a token, threshold {args.threshold}"
    )
    for label, r in results.items():
        print(
            f"  {label:>7}: turns' input {r['read']:>9,.0f} tokens (last {r['last']:>6,.0f}), "
            f"engine read {r['engine']:>9,.0f} (summaries included), "
            f"{r['compactions']:.0f} compactions, {r['seconds']:.1f} s"
        )
    return 0


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "compaction", help="a long previous_response_id chain with and without compaction"
    )
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--answer", type=int, default=200, help="tokens of each answer")
    parser.add_argument("--summary", type=int, default=100, help="tokens of each summary")
    parser.add_argument("--delay", type=float, default=0.002, help="seconds a token")
    parser.add_argument("--threshold", type=int, default=4000, help="compact_threshold")
    parser.set_defaults(handler=_run)
