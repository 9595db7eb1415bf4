"""`tokenizing`: how fast the front end tokenizes long prompts, in threads and in processes.

The server tokenizes a big prompt in a small thread pool (`oai_server.generation.offload`).
That scales with the threads only where the tokenizer releases the GIL while it encodes;
otherwise more prompts need more processes (`vllm serve --api-server-count`). This runs the
same work (`--prompts` prompts of `--chars` characters each, through the model's Hugging
Face tokenizer, as the server calls it) with 1..N threads and 1..N processes and prints the
tokens per second of each, with the scaling over one.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.big_prompts import TOKENIZER

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

# Varied words, so the BPE merges do real work (not one word repeated).
_WORDS = (
    "the", "server", "tokenizes", "a", "long", "retrieval", "prompt", "of", "documents,",
    "tables,", "code", "and", "numbers", "such", "as", "3.14159", "or", "2026-11-28",
    "while", "other", "streams", "keep", "their", "pace;",
)  # fmt: skip

_tokenizer: Any = None


def _load(directory: str) -> None:
    """In each worker process: the tokenizer, once."""
    global _tokenizer
    from transformers import AutoTokenizer

    _tokenizer = AutoTokenizer.from_pretrained(directory)


def _encode(text: str) -> int:
    return len(_tokenizer.encode(text, add_special_tokens=False))


def prompt_text(chars: int, seed: int) -> str:
    """About `chars` characters of varied words, different for each `seed`."""
    words: list[str] = []
    size, i = 0, seed
    while size < chars:
        word = f"{_WORDS[i % len(_WORDS)]}{i % 97}" if i % 5 == 0 else _WORDS[i % len(_WORDS)]
        words.append(word)
        size += len(word) + 1
        i += 7
    return " ".join(words)


def _rate(executor: Executor, texts: list[str]) -> tuple[float, float]:
    """Tokens and seconds for every text of `texts` encoded through `executor`."""
    list(executor.map(_encode, texts[:2]))  # warm-up: first-use costs out of the way
    began = time.perf_counter()
    tokens = sum(executor.map(_encode, texts))
    return tokens, time.perf_counter() - began


def _rows(
    kinds: Iterable[tuple[str, Callable[[int], Executor]]], counts: list[int], texts: list[str]
) -> list[tuple[str, int, float]]:
    rows = []
    for kind, make in kinds:
        for count in counts:
            with make(count) as executor:
                tokens, seconds = _rate(executor, texts)
            rows.append((kind, count, tokens / seconds))
    return rows


def _command(args: argparse.Namespace) -> int:
    directory = str(args.tokenizer)
    _load(directory)
    texts = [prompt_text(args.chars, seed) for seed in range(args.prompts)]
    counts = sorted({1, *args.workers})
    kinds: list[tuple[str, Callable[[int], Executor]]] = [
        ("threads", lambda n: ThreadPoolExecutor(n)),
        ("processes", lambda n: ProcessPoolExecutor(n, initializer=_load, initargs=(directory,))),
    ]
    rows = _rows(kinds, counts, texts)
    print(
        f"tokenizing: {args.prompts} prompts of {args.chars:,} characters, "
        f"{Path(directory).name}, {os.cpu_count()} CPUs"
    )
    print("| workers | kind | tokens/s | x one |\n|---:|---|---:|---:|")
    for kind, count, rate in rows:
        one = next(r for k, c, r in rows if k == kind and c == 1)
        print(f"| {count} | {kind} | {rate:,.0f} | {rate / one:.2f} |")
    return 0


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "tokenizing", help="long prompts' tokenizing rate in 1..N threads and processes"
    )
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    parser.add_argument("--chars", type=int, default=400_000, help="characters a prompt")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[2], help="pool sizes besides one"
    )
    parser.set_defaults(handler=_command)
