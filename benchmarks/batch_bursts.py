"""`batch --bursts N`: chat that comes back after a quiet spell in which a batch ran.

A chat product's day is bursts after quiet spells, and the quiet is when a batch takes the
idle engine (its lines up to `--batch-max-in-flight-idle`). Each of `--burst-turns` turns
measures the same live bursts twice: after `--idle-spell` seconds of nothing (alone), and
after the same spell in which a batch of `--burst-lines` lines had the engine (beside;
the spell counted from the batch's first line done). A
burst is `--burst-size` streams at once; `--bursts` of them follow each other. The first
requests of the first burst meet the idle cap's lines: their wait is the tail, so p99 is
the figure (the target: p99 beside <= 1.25x alone). The batch's lines per second, in its
spell and during the bursts, say what the batch kept.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx

from benchmarks.batch_client import cancel, chat_body, completed, start_batch, ttft
from benchmarks.inproc import latency_summary
from benchmarks.metrics import percentile


async def _bursts(http: httpx.AsyncClient, model: str, args: argparse.Namespace) -> list[float]:
    """`args.bursts` bursts of `args.burst_size` streams at once: each stream's TTFT."""
    ttfts: list[float] = []
    for burst in range(args.bursts):
        first = burst * args.burst_size
        bodies = [
            chat_body(model, first + i, args.burst_max_tokens) for i in range(args.burst_size)
        ]
        ttfts += await asyncio.gather(*(ttft(http, body) for body in bodies))
    return ttfts


async def after_quiet(http: httpx.AsyncClient, model: str, args: argparse.Namespace) -> None:
    """Live bursts after a quiet spell, alone and after a batch had the spell, in turns."""
    alone: list[float] = []
    beside: list[float] = []
    spell_lines = burst_lines = 0
    spell_s = burst_s = 0.0
    for turn in range(args.burst_turns):
        await asyncio.sleep(args.idle_spell)
        turn_alone = await _bursts(http, model, args)
        alone += turn_alone
        batch_id = await start_batch(http, model, args.burst_lines, args.line_max_tokens)
        # The spell counts from the batch's first line done: its lines hold the engine then.
        while await completed(http, batch_id) < 1:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        began = time.perf_counter()
        await asyncio.sleep(args.idle_spell)
        ended, done = time.perf_counter(), await completed(http, batch_id)
        spell_s += ended - began
        spell_lines += done - 1
        turn_beside = await _bursts(http, model, args)
        beside += turn_beside
        burst_s += time.perf_counter() - ended
        # Each turn as it ends: a run cut short on a loaded machine still says something.
        print(
            f"turn {turn + 1}: TTFT alone {latency_summary(turn_alone)}, "
            f"beside {latency_summary(turn_beside)}; {done - 1} lines in the quiet",
            flush=True,
        )
        burst_lines += await completed(http, batch_id) - done
        await cancel(http, batch_id)  # what is left would only delay the next turn
    shape = (
        f"{args.bursts} bursts of {args.burst_size} streams ({args.burst_max_tokens} tokens) "
        f"after {args.idle_spell:g} s quiet, {args.burst_turns} turns"
    )
    print(f"chat after quiet, alone, {shape}: TTFT {latency_summary(alone)}")
    print(
        f"chat after a {args.burst_lines}-line batch ({args.line_max_tokens} tokens a line) "
        f"had the quiet: TTFT {latency_summary(beside)}"
    )
    print(
        f"  p99 ratio {ratio(beside, alone, 99):.2f}x (target <= 1.25x), "
        f"p50 ratio {ratio(beside, alone, 50):.2f}x; batch lines/s "
        f"{spell_lines / max(spell_s, 1e-9):.1f} in the quiet, "
        f"{burst_lines / max(burst_s, 1e-9):.1f} during the bursts"
    )


def ratio(loaded: list[float], alone: list[float], p: float) -> float:
    """The p-th percentile of `loaded` over that of `alone`."""
    return (percentile(loaded, p) or 0.0) / max(percentile(alone, p) or 0.0, 1e-9)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The bursty shape's flags (`--bursts 0`, the default, skips it)."""
    parser.add_argument(
        "--bursts", type=int, default=0, help="live bursts after each quiet spell (0: skip)"
    )
    parser.add_argument("--burst-size", type=int, default=8, help="streams in one burst")
    parser.add_argument("--burst-max-tokens", type=int, default=24)
    parser.add_argument("--burst-turns", type=int, default=2, help="alone / beside turns")
    parser.add_argument(
        "--idle-spell", type=float, default=6.0, help="seconds of quiet before the bursts"
    )
    parser.add_argument("--burst-lines", type=int, default=300, help="the batch in the quiet")
    parser.add_argument("--line-max-tokens", type=int, default=64)
