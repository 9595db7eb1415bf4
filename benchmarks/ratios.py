"""Ours against vLLM: per-metric ratios with their spread across rounds, and the two tables.

A round runs both servers at every load point; a metric's ratio in a round is ours / vllm at the
same load point. Across rounds the ratios are summed up by their geometric mean (the mean that
treats 0.5 and 2 as opposites) and their range. Ratios above 1 are better for throughputs,
worse for latencies.

Records say which server and round they come from in `server_info` ("server", "round"), and
how the server process fared in `server_process` (start-up time, memory, CPU time).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.report import load_order, point_name

Record = Mapping[str, Any]

RATIO_METRICS: Sequence[tuple[str, str]] = (
    ("out tok/s", "metrics.output_throughput"),
    ("req/s", "metrics.request_throughput"),
    ("TTFT p50", "metrics.ttft_ms.p50"),
    ("TTFT p99", "metrics.ttft_ms.p99"),
    ("TPOT p50", "metrics.tpot_ms.p50"),
    ("ITL p50", "metrics.itl_ms.p50"),
    ("E2E p50", "metrics.e2el_ms.p50"),
)
PROCESS_METRICS: Sequence[tuple[str, str, int]] = (
    # header, key of server_process, decimals
    ("start-up s", "startup_s", 1),
    ("RSS idle MiB", "rss_idle_mib", 0),
    ("RSS peak MiB", "rss_peak_mib", 0),
    ("PSS idle MiB", "pss_idle_mib", 0),
    ("PSS peak MiB", "pss_peak_mib", 0),
    ("CPU s", "cpu_s", 1),
)


@dataclass(frozen=True)
class Spread:
    """A mean of values and their range; `n` values."""

    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float], *, geometric: bool = False) -> Spread | None:
        """The spread of `values` (None if there are none); geometric means need positives."""
        if not values:
            return None
        if geometric:
            mean = math.exp(statistics.fmean(math.log(v) for v in values))
        else:
            mean = statistics.fmean(values)
        return cls(mean, min(values), max(values), len(values))

    def format(self, digits: int = 2) -> str:
        """ "0.93 (0.90-0.96)"; the mean alone for a single value."""
        mean = f"{self.mean:,.{digits}f}"
        if self.n == 1:
            return mean
        return f"{mean} ({self.low:,.{digits}f}-{self.high:,.{digits}f})"


def value_at(record: Record, dotted: str) -> Any:
    """The value at a dotted path of a record (None where a key is missing)."""
    value: Any = record
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _key(record: Record) -> tuple[str, str, str]:
    info = record.get("server_info", {})
    return info.get("server", record["label"]), info.get("round", "1"), point_name(record["load"])


def points(records: Sequence[Record]) -> list[str]:
    """The load points of `records`, lightest first."""
    ordered = sorted(records, key=lambda r: load_order(r["load"]))
    return list(dict.fromkeys(point_name(r["load"]) for r in ordered))


def paired_ratios(
    records: Sequence[Record], dotted: str, numerator: str = "ours", denominator: str = "vllm"
) -> dict[str, list[float]]:
    """Per load point, the ratio numerator / denominator of a metric in each round with both."""
    by_key = {_key(r): value_at(r, dotted) for r in records}
    ratios: dict[str, list[float]] = {point: [] for point in points(records)}
    for (server, round_, point), top in sorted(by_key.items()):
        if server != numerator:
            continue
        bottom = by_key.get((denominator, round_, point))
        if not isinstance(top, (int, float)) or not isinstance(bottom, (int, float)):
            continue
        if top > 0 and bottom > 0:  # a geometric mean needs positive ratios
            ratios[point].append(top / bottom)
    return ratios


def ratio_table(
    records: Sequence[Record], numerator: str = "ours", denominator: str = "vllm"
) -> str:
    """Markdown: one row per load point, one column per metric, "mean (min-max)" ratios."""
    per_metric = {
        header: paired_ratios(records, path, numerator, denominator)
        for header, path in RATIO_METRICS
    }
    headers = ["load", "rounds", *(f"{h}" for h, _ in RATIO_METRICS)]
    lines = [_row(headers), "|" + "|".join(["---"] * 2 + ["---:"] * len(RATIO_METRICS)) + "|"]
    for point in points(records):
        rounds = max(len(values[point]) for values in per_metric.values())
        cells = [point, str(rounds)]
        for header, _ in RATIO_METRICS:
            spread = Spread.of(per_metric[header][point], geometric=True)
            cells.append(spread.format() if spread else "-")
        lines.append(_row(cells))
    return "\n".join(lines) + "\n"


def process_table(records: Sequence[Record]) -> str:
    """Markdown: per server and load point, its settings as logged and its process figures,
    "mean (min-max)" across rounds. Idle memory and start-up time belong to a start, so they
    repeat on each load point of that start."""
    headers = ["server", "load", "dtype", "answers right", "max len", "KV tokens"]
    headers += [h for h, _, _ in PROCESS_METRICS]
    lines = [_row(headers), "|" + "|".join(["---"] * 6 + ["---:"] * len(PROCESS_METRICS)) + "|"]
    servers = list(dict.fromkeys(_key(r)[0] for r in records))
    for server in servers:
        for point in points(records):
            group = [r for r in records if _key(r)[0] == server and _key(r)[2] == point]
            if not group:
                continue
            info = group[0].get("server_info", {})
            cells = [server, point] + [
                info.get(k, "?")
                for k in (
                    "logged_dtype",
                    "answers_right",
                    "logged_max_model_len",
                    "logged_kv_cache_tokens",
                )
            ]
            for _, key, digits in PROCESS_METRICS:
                values = [
                    v
                    for r in group
                    if isinstance(v := value_at(r, f"server_process.{key}"), (int, float))
                ]
                spread = Spread.of(values)
                cells.append(spread.format(digits) if spread else "-")
            lines.append(_row(cells))
    return "\n".join(lines) + "\n"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"
