"""Turning request records into a run's metrics: pure arithmetic, no I/O.

The definitions follow `vllm bench serve`, with three of its flaws fixed:

- TTFT is the time to the first chunk carrying generated text, not to the first chunk of the stream
  (chat servers may send a role-only chunk before generating anything).
- ITL is computed per token: a chunk carrying k tokens after a gap g contributes k intervals of
  g/k, so the figure stays right when a server batches several tokens per chunk. The first chunk
  contributes no interval: its gap is the TTFT.
- TPOT = (e2e - TTFT) / (output_tokens - 1), output_tokens from the server's usage when reported.
  A request with one output token has no TPOT; it meets any TPOT limit of the goodput.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.records import RequestRecord

PERCENTILES = (50, 90, 99)
GOODPUT_METRICS = ("ttft", "tpot", "e2el")  # the limits --goodput accepts, in milliseconds


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile, linear between ranks (numpy's default); None if there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(values: Sequence[float]) -> dict[str, float | None]:
    """Mean, p50, p90 and p99 of `values` (all None when there are none)."""
    summary: dict[str, float | None] = {"mean": sum(values) / len(values) if values else None}
    for p in PERCENTILES:
        summary[f"p{p}"] = percentile(values, p)
    return summary


def ttft(record: RequestRecord) -> float | None:
    """Seconds from sending the request to the first chunk carrying generated text."""
    if not record.chunk_times:
        return None
    return record.chunk_times[0] - record.send_time


def e2e_latency(record: RequestRecord) -> float:
    """Seconds from sending the request to the end of its stream."""
    return record.end_time - record.send_time


def tpot(record: RequestRecord) -> float | None:
    """Mean seconds per output token after the first; None with fewer than two output tokens."""
    first = ttft(record)
    tokens = record.output_tokens
    if first is None or tokens < 2:
        return None
    return (e2e_latency(record) - first) / (tokens - 1)


def inter_token_latencies(record: RequestRecord) -> list[float]:
    """Per-token gaps in seconds: a chunk of k tokens after a gap g gives k gaps of g/k.

    Chunks reported to carry no token add no interval; their gap counts towards the next chunk.
    """
    gaps: list[float] = []
    last: float | None = None
    for at, tokens in zip(record.chunk_times, record.chunk_tokens, strict=True):
        if tokens <= 0:
            continue
        if last is not None:
            gaps.extend([(at - last) / tokens] * tokens)
        last = at
    return gaps


def meets_limits(record: RequestRecord, limits_ms: Mapping[str, float]) -> bool:
    """Whether a request succeeded and met every goodput limit (ms, keys of GOODPUT_METRICS)."""
    if not record.ok:
        return False
    measured = {"ttft": ttft(record), "tpot": tpot(record), "e2el": e2e_latency(record)}
    for name, limit in limits_ms.items():
        value = measured[name]
        if name == "ttft" and value is None:
            return False
        if value is not None and value * 1000 > limit:
            return False
    return True


@dataclass
class RunSamples:
    """Per-request latencies in milliseconds of the successful requests, kept for plots."""

    ttft_ms: list[float]
    tpot_ms: list[float]
    itl_ms: list[float]
    e2el_ms: list[float]

    @classmethod
    def of(cls, records: Iterable[RequestRecord]) -> RunSamples:
        ok = [r for r in records if r.ok]
        return cls(
            ttft_ms=[v * 1000 for r in ok if (v := ttft(r)) is not None],
            tpot_ms=[v * 1000 for r in ok if (v := tpot(r)) is not None],
            itl_ms=[v * 1000 for r in ok for v in inter_token_latencies(r)],
            e2el_ms=[e2e_latency(r) * 1000 for r in ok],
        )


def compute_metrics(
    records: Sequence[RequestRecord],
    duration_s: float,
    *,
    cancelled: int = 0,
    goodput_limits_ms: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The metrics of one run, as a JSON-ready dict.

    Throughputs are per second of `duration_s`, the measured phase's wall time.
    `output_len_mismatches` counts successful requests whose output length differs from the one
    they were expected to have.
    """
    ok = [r for r in records if r.ok]
    samples = RunSamples.of(records)
    output_tokens = sum(r.output_tokens for r in ok)
    input_tokens = sum(r.input_tokens or 0 for r in ok)
    mismatches = sum(
        r.expected_output_tokens is not None and r.output_tokens != r.expected_output_tokens
        for r in ok
    )
    per_second = 1 / duration_s if duration_s > 0 else 0.0
    metrics: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "cancelled": cancelled,
        "errors": dict(Counter(r.error for r in records if r.error is not None)),
        "duration_s": duration_s,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "output_len_mismatches": mismatches,
        "request_throughput": len(ok) * per_second,
        "output_throughput": output_tokens * per_second,
        "total_token_throughput": (input_tokens + output_tokens) * per_second,
        "goodput": None,
        "goodput_limits_ms": dict(goodput_limits_ms or {}),
        "ttft_ms": summarize(samples.ttft_ms),
        "tpot_ms": summarize(samples.tpot_ms),
        "itl_ms": summarize(samples.itl_ms),
        "e2el_ms": summarize(samples.e2el_ms),
    }
    if goodput_limits_ms:
        good = sum(meets_limits(r, goodput_limits_ms) for r in records)
        metrics["goodput"] = good * per_second
    return metrics


def parse_goodput(items: Sequence[str]) -> dict[str, float]:
    """Parse `ttft:500 tpot:50` into {"ttft": 500.0, "tpot": 50.0} (milliseconds)."""
    limits: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or name not in GOODPUT_METRICS:
            raise ValueError(
                f"goodput limit {item!r}: expected NAME:MS with NAME in {GOODPUT_METRICS}"
            )
        limits[name] = float(value)
        if limits[name] <= 0:
            raise ValueError(f"goodput limit {item!r} must be positive")
    return limits
