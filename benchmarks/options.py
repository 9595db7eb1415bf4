"""Command-line options shared by the subcommands, and their translation into settings.

Each `add_*` function adds one group of flags; the functions below them turn the parsed flags
into the objects of `loops`, `workloads` and `runner`, so a subcommand is a few lines of wiring.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from benchmarks.client import ApiConfig
from benchmarks.loops import LoadSpec
from benchmarks.metrics import GOODPUT_METRICS, parse_goodput
from benchmarks.report import DEFAULT_OUT
from benchmarks.runner import HttpTarget, RunSettings
from benchmarks.workloads import WorkloadConfig


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _float_list(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def key_value(text: str) -> tuple[str, str]:
    """An argparse type for KEY=VALUE (a server setting, a label)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """Which OpenAI-compatible server to drive, and how."""
    group = parser.add_argument_group("target")
    group.add_argument(
        "--base-url", required=True, help="the API's base URL, e.g. http://127.0.0.1:8000/v1"
    )
    group.add_argument(
        "--model", help="model name to send (default: the first one the server lists)"
    )
    group.add_argument(
        "--api",
        choices=("completions", "chat"),
        default="completions",
        help="POST /completions or /chat/completions (default: %(default)s)",
    )
    group.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY"),
        help="bearer token (default: $OPENAI_API_KEY)",
    )
    group.add_argument(
        "--no-continuous-usage",
        dest="continuous_usage",
        action="store_false",
        help="do not ask for usage in every chunk (for servers that reject "
        "stream_options.continuous_usage_stats); chunks are then counted as one token",
    )
    group.add_argument(
        "--extra-body",
        type=json.loads,
        default={},
        metavar="JSON",
        help="JSON object merged into every request body",
    )
    group.add_argument(
        "--request-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="per-request timeout in seconds (default: %(default)s)",
    )


def add_load_options(parser: argparse.ArgumentParser, *, sweep: bool) -> None:
    """A closed loop (--concurrency) or an open loop (--rate); lists when sweeping."""
    group = parser.add_argument_group("load")
    one_of = group.add_mutually_exclusive_group(required=True)
    each = "comma-separated values, one run each: " if sweep else ""
    one_of.add_argument(
        "--concurrency",
        type=_int_list if sweep else int,
        metavar="N" + (",N..." if sweep else ""),
        help=f"{each}requests in flight at once (closed loop)",
    )
    one_of.add_argument(
        "--rate",
        type=_float_list if sweep else float,
        metavar="R" + (",R..." if sweep else ""),
        help=f"{each}requests per second, Poisson arrivals (open loop; inf: all at once)",
    )
    group.add_argument(
        "--max-concurrency",
        type=int,
        metavar="N",
        help="with --rate: at most this many requests in flight",
    )


def add_workload_options(parser: argparse.ArgumentParser) -> None:
    """What to send."""
    group = parser.add_argument_group("workload")
    group.add_argument(
        "--dataset",
        default="random",
        help="random (prompts of --input-len tokens), chat-set (the conversations shipped in "
        'benchmarks/data), or a JSONL file of {"messages": [...]} (default: %(default)s)',
    )
    group.add_argument(
        "--input-len", type=int, default=128, help="prompt tokens, for random prompts"
    )
    group.add_argument("--output-len", type=int, default=128, help="max_tokens of every request")
    group.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="model directory whose tokenizer makes random prompts exactly --input-len tokens",
    )
    group.add_argument(
        "--no-ignore-eos",
        dest="ignore_eos",
        action="store_false",
        help="do not send ignore_eos (a vLLM extension): outputs may then end early",
    )
    group.add_argument("--temperature", type=float, default=0.0, help="(default: %(default)s)")
    group.add_argument(
        "--seed", type=int, default=0, help="seed of prompt sampling and arrival times"
    )


def add_run_options(parser: argparse.ArgumentParser, *, default_label: str | None = None) -> None:
    """How runs are bounded, labelled and reported."""
    group = parser.add_argument_group("run")
    group.add_argument("--num-requests", type=int, default=128, help="measured requests per run")
    group.add_argument("--warmup", type=int, default=4, help="requests sent first and not counted")
    group.add_argument(
        "--max-duration",
        type=float,
        default=300.0,
        metavar="S",
        help="stop a run after this many seconds, warm-up included (default: %(default)s)",
    )
    group.add_argument(
        "--goodput",
        nargs="+",
        default=[],
        metavar="NAME:MS",
        help="limits a request must meet to count towards goodput; NAME in "
        + ", ".join(GOODPUT_METRICS),
    )
    group.add_argument(
        "--label",
        default=default_label,
        help="name of the server in tables and plots"
        + ("" if default_label else " (default: host:port)"),
    )
    group.add_argument(
        "--server-info",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="server settings to record with the results (repeatable)",
    )
    group.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="results folder (default: benchmarks/results)"
    )
    group.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bar"
    )
    group.add_argument("--no-plots", dest="plots", action="store_false", help="no PNG plots")


def loads(args: argparse.Namespace) -> list[LoadSpec]:
    """The load points asked for, from --concurrency or --rate (one value or a list)."""
    if args.concurrency is not None:
        values = args.concurrency if isinstance(args.concurrency, list) else [args.concurrency]
        return [LoadSpec(concurrency=c) for c in values]
    values = args.rate if isinstance(args.rate, list) else [args.rate]
    return [LoadSpec(rate=r, max_concurrency=args.max_concurrency) for r in values]


def workload_config(
    args: argparse.Namespace, tokenizer_default: str | None = None
) -> WorkloadConfig:
    return WorkloadConfig(
        dataset=args.dataset,
        input_len=args.input_len,
        output_len=args.output_len,
        ignore_eos=args.ignore_eos,
        temperature=args.temperature,
        tokenizer=args.tokenizer or tokenizer_default,
        seed=args.seed,
    )


def run_settings(
    args: argparse.Namespace,
    *,
    label: str | None = None,
    extra_info: Mapping[str, str] | None = None,
) -> RunSettings:
    try:
        goodput = parse_goodput(args.goodput)
    except ValueError as exc:
        raise SystemExit(f"--goodput: {exc}") from exc
    return RunSettings(
        label=args.label or label or "run",
        server_info={**(extra_info or {}), **dict(args.server_info)},
        num_requests=args.num_requests,
        warmup=args.warmup,
        max_duration_s=args.max_duration,
        goodput_ms=goodput,
        progress=args.progress,
    )


def http_target(args: argparse.Namespace, model: str) -> HttpTarget:
    api = ApiConfig(
        base_url=args.base_url,
        model=model,
        api=args.api,
        continuous_usage=args.continuous_usage,
        extra_body=args.extra_body,
    )
    return HttpTarget(api=api, api_key=args.api_key, request_timeout_s=args.request_timeout)


def default_label(base_url: str) -> str:
    """host:port of the base URL: a name that tells runs against different servers apart."""
    return urlsplit(base_url).netloc or base_url
