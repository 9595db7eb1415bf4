"""`bigprompts`: do running streams keep their pace while big prompts arrive?

Streams run alone, then again while `--big` oversized prompts (`--big-mb` MB each, past any
context, under the 4 MiB body limit) and `--long` long prompts that fit (`--long-chars`)
arrive at once. Printed: each phase's worst and p99 gap between a stream's chunks, their
ratio, the time to refuse an oversized prompt and to answer a long one.

Against any server (`--base-url`: ours on the real engine, `vllm serve`), or by default
our app on the fake engine with a long context (`--max-model-len`) and the real model's
tokenizer (`--tokenizer`), served from a thread of this process: the tokenizing is real,
the generation free.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.inproc import MODEL, serving
from benchmarks.metrics import percentile

if TYPE_CHECKING:
    from fastapi import FastAPI

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

TOKENIZER = Path.home() / ".cache/oai-server/models/smollm2-135m-instruct"


def _fake_app(tokenizer_dir: Path, max_model_len: int) -> FastAPI:
    from transformers import AutoTokenizer

    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.engine.protocol import Tokenizer
    from oai_server.engine.types import ModelInfo
    from oai_server.engine.vllm.holder import VLLMTokenizer
    from oai_server.settings import Settings

    hf = AutoTokenizer.from_pretrained(tokenizer_dir)
    real = VLLMTokenizer(hf)

    class RealTokenizerEngine(FakeEngine):
        @property
        def model_info(self) -> ModelInfo:
            return dataclasses.replace(super().model_info, vocab_size=len(hf))

        @property
        def tokenizer(self) -> Tokenizer:
            return real

    engine = RealTokenizerEngine(reply="tok " * 400, token_delay=0.02, max_model_len=max_model_len)
    return create_app(Settings(log_level="warning"), engine)


async def _stream(client: httpx.AsyncClient, max_tokens: int, gaps: list[float]) -> None:
    body = {
        "model": MODEL, "messages": [{"role": "user", "content": "Count for me"}],
        "stream": True, "max_tokens": max_tokens, "ignore_eos": True,
    }  # fmt: skip
    last: float | None = None
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                now = time.perf_counter()
                if last is not None:
                    gaps.append(now - last)
                last = now


async def _timed(client: httpx.AsyncClient, body: bytes) -> tuple[int, float]:
    began = time.perf_counter()
    response = await client.post(
        "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    return response.status_code, time.perf_counter() - began


def _chat(text: str, max_tokens: int) -> bytes:
    messages = [{"role": "user", "content": text}]
    return json.dumps({"model": MODEL, "messages": messages, "max_tokens": max_tokens}).encode()


async def _phase(base: str, args: argparse.Namespace, bodies: list[bytes]) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=args.streams + len(bodies) + 4)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=300) as client:
        gaps: list[float] = []
        streams = [
            asyncio.create_task(_stream(client, args.max_tokens, gaps)) for _ in range(args.streams)
        ]
        await asyncio.sleep(args.delay)  # the streams under way
        answers = await asyncio.gather(*(_timed(client, body) for body in bodies))
        await asyncio.gather(*streams)
    return {"worst": max(gaps), "p99": percentile(gaps, 99) or 0.0, "answers": answers}


async def _measure(base: str, args: argparse.Namespace) -> None:
    oversized = _chat("lorem ipsum " * int(args.big_mb * 1e6 / 12), 16)
    long = _chat("a long prompt that fits the context " * (args.long_chars // 36), 1)
    await _phase(base, args, [oversized, long])  # warm-up: first-use costs out of the way
    alone = await _phase(base, args, [])
    busy = await _phase(base, args, [oversized] * args.big + [long] * args.long)
    print(
        f"bigprompts: {args.streams} streams of {args.max_tokens} tokens; {args.big} prompts "
        f"of {args.big_mb} MB and {args.long} of {args.long_chars} chars arrive at once"
    )
    for name, phase in (("alone", alone), ("big prompts", busy)):
        print(f"  {name:12} gap worst {phase['worst'] * 1e3:8.1f} ms  "
              f"p99 {phase['p99'] * 1e3:8.1f} ms")  # fmt: skip
    print(f"  worst gap ratio {busy['worst'] / alone['worst']:.2f}x, "
          f"p99 ratio {busy['p99'] / alone['p99']:.2f}x")  # fmt: skip
    answers = busy["answers"]
    for label, part in (("refused", answers[: args.big]), ("long", answers[args.big :])):
        if part:
            codes = sorted({code for code, _ in part})
            seconds = ", ".join(f"{s:.3f}" for _, s in part)
            print(f"  {label:8} status {codes} in s: {seconds}")


def _command(args: argparse.Namespace) -> int:
    context = (
        nullcontext(args.base_url.removesuffix("/v1"))
        if args.base_url
        else serving(_fake_app(args.tokenizer, args.max_model_len))
    )
    with context as base:
        asyncio.run(_measure(base, args))
    return 0


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "bigprompts", help="streams' inter-chunk gaps while big prompts arrive; refusal time"
    )
    parser.add_argument("--base-url", help="a running server (default: ours, fake engine)")
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    parser.add_argument("--max-model-len", type=int, default=32768)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--big", type=int, default=4, help="oversized prompts")
    parser.add_argument("--big-mb", type=float, default=3.0)
    parser.add_argument("--long", type=int, default=2, help="long prompts that fit")
    parser.add_argument("--long-chars", type=int, default=50_000)
    parser.add_argument("--delay", type=float, default=0.5, metavar="S")
    parser.set_defaults(handler=_command)
