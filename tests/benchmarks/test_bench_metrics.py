"""Metric arithmetic on scripted timings."""

from __future__ import annotations

import random

import numpy as np
import pytest

from benchmarks.metrics import (
    compute_metrics,
    e2e_latency,
    inter_token_latencies,
    meets_limits,
    parse_goodput,
    percentile,
    summarize,
    tpot,
    ttft,
)
from benchmarks.records import RequestRecord


def record(
    chunks: list[tuple[float, int]],
    end: float,
    *,
    send: float = 0.0,
    completion_tokens: int | None = None,
    prompt_tokens: int | None = 10,
    error: str | None = None,
) -> RequestRecord:
    return RequestRecord(
        send_time=send,
        end_time=end,
        chunk_times=[at for at, _ in chunks],
        chunk_tokens=[n for _, n in chunks],
        completion_tokens=completion_tokens,
        prompt_tokens=prompt_tokens,
        error=error,
    )


def test_percentile_of_nothing_is_none() -> None:
    assert percentile([], 50) is None
    assert summarize([]) == {"mean": None, "p50": None, "p90": None, "p99": None}


def test_percentile_of_one_value_is_that_value() -> None:
    assert summarize([7.0]) == {"mean": 7.0, "p50": 7.0, "p90": 7.0, "p99": 7.0}


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([1.0, 2.0], 50) == pytest.approx(1.5)
    assert percentile([3.0, 1.0, 2.0, 4.0], 0) == 1.0
    assert percentile([3.0, 1.0, 2.0, 4.0], 100) == 4.0
    assert percentile([10.0, 20.0, 30.0, 40.0, 50.0], 90) == pytest.approx(46.0)


@pytest.mark.parametrize("size", [2, 3, 10, 101, 1000])
def test_percentile_matches_numpy(size: int) -> None:
    rng = random.Random(size)
    values = [rng.expovariate(1.0) for _ in range(size)]
    for p in (50, 90, 99):
        assert percentile(values, p) == pytest.approx(float(np.percentile(values, p)))


def test_ttft_tpot_and_e2e() -> None:
    # Sent at 1.0; tokens at 1.5, 1.6, 1.7, 1.8; stream ends at 1.9.
    r = record([(1.5, 1), (1.6, 1), (1.7, 1), (1.8, 1)], end=1.9, send=1.0, completion_tokens=4)
    assert ttft(r) == pytest.approx(0.5)
    assert e2e_latency(r) == pytest.approx(0.9)
    assert tpot(r) == pytest.approx((0.9 - 0.5) / 3)
    assert inter_token_latencies(r) == pytest.approx([0.1, 0.1, 0.1])


def test_a_chunk_of_several_tokens_gives_one_interval_per_token() -> None:
    # One token at 0.2, then a chunk of three tokens 0.3 s later, then one token 0.1 s after that.
    r = record([(0.2, 1), (0.5, 3), (0.6, 1)], end=0.6, completion_tokens=5)
    assert inter_token_latencies(r) == pytest.approx([0.1, 0.1, 0.1, 0.1])
    assert tpot(r) == pytest.approx(0.1)


def test_a_chunk_reported_to_carry_no_token_adds_no_interval() -> None:
    r = record([(0.2, 1), (0.3, 0), (0.6, 2)], end=0.6, completion_tokens=3)
    assert inter_token_latencies(r) == pytest.approx([0.2, 0.2])


def test_without_reported_usage_output_tokens_are_counted_from_chunks() -> None:
    r = record([(0.2, 1), (0.4, 1), (0.6, 1)], end=0.7)
    assert r.output_tokens == 3
    assert tpot(r) == pytest.approx(0.25)


def test_one_output_token_has_no_tpot_and_no_itl() -> None:
    r = record([(0.2, 1)], end=0.25, completion_tokens=1)
    assert tpot(r) is None
    assert inter_token_latencies(r) == []


def test_a_stream_without_content_has_no_ttft() -> None:
    r = record([], end=0.3, completion_tokens=0)
    assert ttft(r) is None
    assert tpot(r) is None


def test_run_metrics() -> None:
    records = [
        record([(0.1, 1), (0.2, 1), (0.3, 1)], end=0.3, completion_tokens=3),
        record([(0.2, 2), (0.4, 2)], end=0.5, send=0.1, completion_tokens=4, prompt_tokens=None),
        record([], end=0.2, error="http_500", prompt_tokens=None),
        record([], end=1.0, error="timeout", prompt_tokens=None),
        record([], end=1.0, error="timeout", prompt_tokens=None),
    ]
    records[1].expected_prompt_tokens = 12  # no usage from the server: the client's count is used
    metrics = compute_metrics(records, duration_s=2.0, cancelled=1)
    assert metrics["completed"] == 2
    assert metrics["failed"] == 3
    assert metrics["cancelled"] == 1
    assert metrics["errors"] == {"http_500": 1, "timeout": 2}
    assert metrics["input_tokens"] == 22
    assert metrics["output_tokens"] == 7
    assert metrics["request_throughput"] == pytest.approx(1.0)
    assert metrics["output_throughput"] == pytest.approx(3.5)
    assert metrics["total_token_throughput"] == pytest.approx(14.5)
    assert metrics["goodput"] is None
    assert metrics["ttft_ms"] == pytest.approx(
        {"mean": 100.0, "p50": 100.0, "p90": 100.0, "p99": 100.0}
    )
    assert metrics["e2el_ms"]["mean"] == pytest.approx(350.0)
    # TPOTs 100 ms and (400 - 100) / 3 = 100 ms; ITL per token: 100, 100, then 2 x 100.
    assert metrics["tpot_ms"]["p50"] == pytest.approx(100.0)
    assert metrics["itl_ms"]["p99"] == pytest.approx(100.0)


def test_output_length_mismatches_are_counted() -> None:
    short = record([(0.1, 1)], end=0.2, completion_tokens=1)
    exact = record([(0.1, 1), (0.2, 1)], end=0.2, completion_tokens=2)
    unchecked = record([(0.1, 1)], end=0.2, completion_tokens=1)
    short.expected_output_tokens = exact.expected_output_tokens = 2
    metrics = compute_metrics([short, exact, unchecked], duration_s=1.0)
    assert metrics["output_len_mismatches"] == 1


def test_goodput_counts_requests_meeting_every_limit() -> None:
    limits = {"ttft": 150.0, "tpot": 50.0}
    fast = record([(0.1, 1), (0.13, 1), (0.16, 1)], end=0.16, completion_tokens=3)
    slow_start = record([(0.2, 1), (0.22, 1)], end=0.22, completion_tokens=2)
    slow_tokens = record([(0.1, 1), (0.2, 1)], end=0.2, completion_tokens=2)
    single = record([(0.1, 1)], end=0.1, completion_tokens=1)  # no TPOT: meets the TPOT limit
    failed = record([(0.1, 1)], end=0.1, completion_tokens=1, error="stream_error")
    assert [meets_limits(r, limits) for r in (fast, slow_start, slow_tokens, single, failed)] == [
        True,
        False,
        False,
        True,
        False,
    ]
    metrics = compute_metrics(
        [fast, slow_start, slow_tokens, single, failed], 2.0, goodput_limits_ms=limits
    )
    assert metrics["goodput"] == pytest.approx(1.0)
    assert metrics["goodput_limits_ms"] == limits


def test_zero_duration_gives_zero_throughput() -> None:
    metrics = compute_metrics([], duration_s=0.0)
    assert metrics["request_throughput"] == 0.0
    assert metrics["ttft_ms"]["p50"] is None


def test_parse_goodput() -> None:
    assert parse_goodput(["ttft:500", "tpot:50", "e2el:2000"]) == {
        "ttft": 500.0,
        "tpot": 50.0,
        "e2el": 2000.0,
    }
    for bad, message in (
        ("ttft", "expected NAME:MS"),
        ("itl:5", "expected NAME:MS"),
        ("ttft:-1", "must be positive"),
        ("ttft:x", "could not convert"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_goodput([bad])
