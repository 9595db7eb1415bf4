"""Result records: building them, saving and loading JSON, and the markdown table of a set of runs.

A record is a plain JSON object, one per run (one load point), so results from different days,
servers and machines can be put side by side by `python -m benchmarks report`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.metrics import RunSamples

SCHEMA = "oai-bench/1"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results"


def git_revision() -> str:
    """This repository's commit, "-dirty" with uncommitted changes; "unknown" without git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}-dirty" if status.strip() else head


def make_record(
    *,
    label: str,
    target: Mapping[str, Any],
    server_info: Mapping[str, str],
    workload: Mapping[str, Any],
    load: Mapping[str, Any],
    limits: Mapping[str, Any],
    metrics: Mapping[str, Any],
    samples: RunSamples,
) -> dict[str, Any]:
    """One run's record.

    `target` says what was measured (base URL, API, model); `limits` how the run was bounded
    (requests, warm-up, duration).
    """
    return {
        "schema": SCHEMA,
        "label": label,
        **target,
        "server_info": dict(server_info),
        "workload": dict(workload),
        "load": dict(load),
        "limits": dict(limits),
        "git_revision": git_revision(),
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "client_host": {
            "node": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "metrics": dict(metrics),
        "samples": {
            "ttft_ms": samples.ttft_ms,
            "tpot_ms": samples.tpot_ms,
            "e2el_ms": samples.e2el_ms,
        },
    }


def slug(text: str) -> str:
    """A file-name-safe form of a label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "run"


def run_stamp() -> str:
    """A sortable time stamp for the file names of one invocation."""
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def save_record(record: Mapping[str, Any], out_dir: Path, stamp: str) -> Path:
    """Write a record as `<stamp>-<label>-<load point>.json` in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stamp}-{slug(record['label'])}-{point_name(record['load'])}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


def load_records(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Records from JSON files, each holding one record or a list of them."""
    records: list[dict[str, Any]] = []
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        for record in data if isinstance(data, list) else [data]:
            if record.get("schema") != SCHEMA:
                raise ValueError(
                    f"{path}: not a benchmark record (schema {record.get('schema')!r})"
                )
            records.append(record)
    return records


def point_name(load: Mapping[str, Any]) -> str:
    """A load point (a record's "load") in short, as "c32", "r4" or "r4-max8"."""
    if load["mode"] == "closed":
        return f"c{load['concurrency']}"
    cap = f"-max{load['max_concurrency']}" if load.get("max_concurrency") else ""
    rate = load["rate"]
    return f"r{rate:g}{cap}" if isinstance(rate, (int, float)) else f"r{rate}{cap}"


def load_order(load: Mapping[str, Any]) -> float:
    """A sort key of load points: the concurrency or the rate (inf for "all at once")."""
    value = load.get("concurrency") if load["mode"] == "closed" else load.get("rate")
    return float(value) if isinstance(value, (int, float)) else float("inf")


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


COLUMNS: Sequence[tuple[str, str, int]] = (
    # header, dotted path into the record, decimals
    ("req/s", "metrics.request_throughput", 2),
    ("out tok/s", "metrics.output_throughput", 1),
    ("total tok/s", "metrics.total_token_throughput", 1),
    ("goodput req/s", "metrics.goodput", 2),
    ("TTFT p50 ms", "metrics.ttft_ms.p50", 1),
    ("TTFT p99 ms", "metrics.ttft_ms.p99", 1),
    ("TPOT p50 ms", "metrics.tpot_ms.p50", 1),
    ("TPOT p99 ms", "metrics.tpot_ms.p99", 1),
    ("ITL p50 ms", "metrics.itl_ms.p50", 1),
    ("ITL p99 ms", "metrics.itl_ms.p99", 1),
    ("E2E p50 ms", "metrics.e2el_ms.p50", 1),
    ("duration s", "metrics.duration_s", 1),
)


def _get(record: Mapping[str, Any], dotted: str) -> Any:
    value: Any = record
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _outcome(metrics: Mapping[str, Any]) -> str:
    parts = [str(metrics["completed"])]
    errors = metrics.get("errors") or {}
    if errors:
        parts.append("errors " + ", ".join(f"{kind} x{n}" for kind, n in sorted(errors.items())))
    if metrics.get("cancelled"):
        parts.append(f"cut off {metrics['cancelled']}")
    return "; ".join(parts)


def markdown_table(records: Sequence[Mapping[str, Any]]) -> str:
    """A markdown table with one row per record: labels in first-seen order, lightest load first."""
    labels = list(dict.fromkeys(record["label"] for record in records))
    records = sorted(records, key=lambda r: (labels.index(r["label"]), load_order(r["load"])))
    headers = ["label", "load", "ok", *(header for header, _, _ in COLUMNS)]
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join(["---"] * 3 + ["---:"] * len(COLUMNS)) + "|",
    ]
    for record in records:
        cells = [record["label"], point_name(record["load"]), _outcome(record["metrics"])]
        cells += [_fmt(_get(record, path), digits) for _, path, digits in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def describe_runs(records: Sequence[Mapping[str, Any]]) -> str:
    """A few lines above the table saying what was measured, so a saved table stands on its own."""
    lines = []
    for label in dict.fromkeys(r["label"] for r in records):
        first = next(r for r in records if r["label"] == label)
        info = ", ".join(f"{k}={v}" for k, v in first.get("server_info", {}).items())
        work = first["workload"]
        shape = (
            f"in {work['input_len']} / out {work['output_len']}"
            if "input_len" in work
            else f"out {work['output_len']}"
        )
        lines.append(
            f"- **{label}**: {first.get('base_url') or 'in-process engine'} ({first.get('api')}, "
            f"model {first.get('model')}), {work['dataset']} {shape}, git {first['git_revision']}, "
            f"{first['timestamp']}" + (f"; {info}" if info else "")
        )
    return "\n".join(lines) + "\n"
