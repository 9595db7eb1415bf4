"""One measured run per load point: warm-up, the loop under a progress bar, metrics, record.

`measure` and `finish` work with any `send` coroutine; `run_http` wires them to an HTTP server. The
`ceiling` subcommand wires them to the engine in-process, and `compare` can call `run_http` in
turns.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from benchmarks.client import ApiConfig, make_client, send_request
from benchmarks.loops import LoadSpec, LoopResult, Send, run_load
from benchmarks.metrics import RunSamples, compute_metrics
from benchmarks.records import RequestRecord
from benchmarks.report import make_record, point_name
from benchmarks.workloads import RequestSpec, Workload

logger = logging.getLogger(__name__)


class WarmupError(RuntimeError):
    """Every warm-up request failed: the target is down or rejects them; measuring is pointless."""


@dataclass
class RunSettings:
    """How every run of an invocation is bounded, labelled and judged."""

    label: str
    server_info: Mapping[str, str] = field(default_factory=dict)
    num_requests: int = 128
    warmup: int = 4
    max_duration_s: float = 300.0
    goodput_ms: Mapping[str, float] = field(default_factory=dict)
    progress: bool = True

    def limits(self) -> dict[str, Any]:
        return {
            "num_requests": self.num_requests,
            "warmup": self.warmup,
            "max_duration_s": self.max_duration_s,
        }


def _warmup_load(load: LoadSpec, count: int) -> LoadSpec:
    """Warm-up runs as a closed loop, as concurrent as the run itself when it has the requests."""
    return LoadSpec(
        concurrency=max(1, min(count, load.concurrency or load.max_concurrency or count))
    )


async def measure(
    send: Send, specs: Sequence[RequestSpec], load: LoadSpec, settings: RunSettings, seed: int = 0
) -> LoopResult:
    """Send the first `settings.warmup` specs uncounted, then the rest under `load`, in time."""
    warm, measured = specs[: settings.warmup], specs[settings.warmup :]
    deadline = time.perf_counter() + settings.max_duration_s
    name = f"{settings.label} {point_name(load.describe())}"
    if warm:
        with tqdm(
            total=len(warm),
            desc=f"{name} warm-up",
            unit="req",
            file=sys.stderr,
            leave=False,
            disable=not settings.progress,
        ) as bar:
            result = await run_load(
                send,
                warm,
                _warmup_load(load, len(warm)),
                deadline=deadline,
                on_done=lambda _: bar.update(),
            )
        failures = [r for r in result.records if not r.ok]
        if failures and len(failures) == len(result.records):
            first = failures[0]
            raise WarmupError(
                f"all {len(failures)} warm-up requests failed; "
                f"first: {first.error} {first.error_detail}"
            )
    with tqdm(
        total=len(measured), desc=name, unit="req", file=sys.stderr, disable=not settings.progress
    ) as bar:
        errors = 0

        def on_done(record: RequestRecord) -> None:
            nonlocal errors
            bar.update()
            if not record.ok:
                errors += 1
                bar.set_postfix(errors=errors, refresh=False)

        result = await run_load(send, measured, load, deadline=deadline, on_done=on_done, seed=seed)
    if result.hit_deadline:
        logger.warning(
            "%s reached the %.0f s limit: %d requests cut off, %d not sent",
            name,
            settings.max_duration_s,
            result.cancelled,
            len(measured) - len(result.finished) - result.cancelled,
        )
    for spec, record in result.finished:
        record.expected_prompt_tokens = spec.input_tokens
        record.expected_output_tokens = spec.max_tokens if spec.ignore_eos else None
    return result


def finish(
    result: LoopResult,
    load: LoadSpec,
    settings: RunSettings,
    target: Mapping[str, Any],
    workload: Mapping[str, Any],
) -> dict[str, Any]:
    """The record of a measured run."""
    records = result.records
    metrics = compute_metrics(
        records,
        result.duration_s,
        cancelled=result.cancelled,
        goodput_limits_ms=settings.goodput_ms,
    )
    return make_record(
        label=settings.label,
        target=target,
        server_info=settings.server_info,
        workload=workload,
        load=load.describe(),
        limits=settings.limits(),
        metrics=metrics,
        samples=RunSamples.of(records),
    )


@dataclass
class HttpTarget:
    """An OpenAI-compatible server and how to reach it."""

    api: ApiConfig
    api_key: str | None = None
    request_timeout_s: float = 600.0

    def describe(self) -> dict[str, Any]:
        return {"base_url": self.api.base_url, "api": self.api.api, "model": self.api.model}


async def run_http(
    target: HttpTarget,
    workload: Workload,
    load: LoadSpec,
    settings: RunSettings,
    seed_offset: int = 0,
) -> dict[str, Any]:
    """Measure one load point against an HTTP server and return its record.

    Each `seed_offset` gives different random prompts, so runs do not hit each other's prefix cache.
    """
    specs = workload.requests(settings.warmup + settings.num_requests, seed_offset=seed_offset)
    pool = max(
        load.pool_size(settings.num_requests),
        _warmup_load(load, settings.warmup).pool_size(settings.warmup),
    )
    async with make_client(
        target.api.base_url, pool, target.request_timeout_s, target.api_key
    ) as client:
        send = functools.partial(send_request, client, target.api)
        result = await measure(send, specs, load, settings, seed=seed_offset)
    return finish(result, load, settings, target.describe(), workload.config.describe())
