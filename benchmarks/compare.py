"""`compare`: our server against `vllm serve`, same model, same workload, in turns.

Each round starts our server, measures every load point, stops it; then the same for vLLM,
with the same prompts (new prompts each round). One server runs at a time: on a small machine
two idle engines would still take CPU from each other. Per start it records the time from
process start to a healthy `/health`, and the memory of the server's process tree at rest;
per load point the peak memory under load and the CPU time used. The output is the usual
records, table and plots, then the table of ratios (ours / vllm) and that of the processes.

With `--defaults` neither server gets engine flags or CPU environment: each runs as it would
out of the box, and the tables show which dtype, context length and KV cache each chose.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks import options, quality
from benchmarks.client import ApiConfig
from benchmarks.contenders import CONTENDERS, OURS, EngineSettings, contender, parse_engine_log
from benchmarks.loops import LoadSpec
from benchmarks.proc_stats import MemorySampler, tree_cpu_seconds, tree_memory
from benchmarks.publish import publish
from benchmarks.ratios import process_table, ratio_table
from benchmarks.report import run_stamp, slug
from benchmarks.runner import HttpTarget, WarmupError, run_http
from benchmarks.server_process import ServerProcess, ServerStartError, free_port, running
from benchmarks.workloads import Workload

SERVED_NAME = "smollm2-135m-instruct"
# Let start-up work (lazy imports, first allocations) settle before "idle" memory is read.
IDLE_SETTLE_S = 2.0


@dataclass
class Plan:
    """What one invocation runs: the servers' settings and the workload."""

    model_dir: Path
    ours_model_dir: Path | None  # None: ours serves its embedded model by itself
    engine: EngineSettings | None  # None: out of the box
    workload: Workload
    loads: list[LoadSpec]
    out: Path
    stamp: str  # starts the names of the invocation's files

    @property
    def logs(self) -> Path:
        return self.out / f"{self.stamp}-compare-logs"

    @property
    def mode(self) -> str:
        return "out-of-the-box" if self.engine is None else "same-settings"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `compare` subcommand."""
    parser = subparsers.add_parser(
        "compare",
        help="our server against `vllm serve` on the same model, in turns; ratios ours / vllm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group = parser.add_argument_group("servers")
    group.add_argument(
        "--model-dir",
        type=Path,
        help="model directory for both (default: the embedded model, converted once into "
        "~/.cache/oai-server)",
    )
    group.add_argument("--served-model-name", default=SERVED_NAME)
    group.add_argument(
        "--defaults",
        action="store_true",
        help="out of the box: no engine flags and no VLLM_CPU_* environment for either server; "
        "without --model-dir ours is started without --model (its embedded model)",
    )
    group.add_argument("--dtype", default="bfloat16", help="(default: %(default)s)")
    group.add_argument("--max-model-len", type=int, default=2048)
    group.add_argument("--no-enforce-eager", dest="enforce_eager", action="store_false")
    group.add_argument(
        "--kvcache-space", type=int, default=2, metavar="GIB", help="VLLM_CPU_KVCACHE_SPACE"
    )
    group.add_argument(
        "--threads-bind",
        default="all",
        help="VLLM_CPU_OMP_THREADS_BIND: all (every core), auto (vLLM's default) or a list",
    )
    for name in CONTENDERS:
        group.add_argument(
            f"--{name}-arg",
            dest=f"{name}_args",
            action="append",
            default=[],
            metavar="ARG",
            help=f"one more argument for {name}'s command line (repeatable; "
            f"--{name}-arg=--flag=value for flags)",
        )
    group.add_argument("--rounds", type=int, default=2, help="A B rounds (default: %(default)s)")
    group.add_argument("--start-timeout", type=float, default=600.0, metavar="S")
    group.add_argument("--api", choices=("completions", "chat"), default="completions")
    group.add_argument("--request-timeout", type=float, default=600.0, metavar="S")
    options.add_load_options(parser, sweep=True)
    options.add_workload_options(parser)
    options.add_run_options(parser, default_label="ours-vs-vllm")
    parser.set_defaults(handler=_command)


def _plan(args: argparse.Namespace) -> Plan:
    model_dir = args.model_dir
    if model_dir is None:
        from oai_server.models.embedded_model import ensure_embedded_model

        model_dir = ensure_embedded_model(Path.home() / ".cache" / "oai-server")
    engine = None
    if not args.defaults:
        engine = EngineSettings(
            dtype=args.dtype,
            max_model_len=args.max_model_len,
            enforce_eager=args.enforce_eager,
            kvcache_space_gib=args.kvcache_space,
            threads_bind=args.threads_bind,
        )
    return Plan(
        model_dir=model_dir,
        ours_model_dir=None if args.defaults and args.model_dir is None else model_dir,
        engine=engine,
        workload=Workload(
            options.workload_config(args, tokenizer_default=str(model_dir)), args.api
        ),
        loads=options.loads(args),
        stamp=run_stamp(),
        out=args.out,
    )


def _command(args: argparse.Namespace) -> int:
    if args.rounds < 1:
        raise SystemExit("--rounds: at least 1")
    plan = _plan(args)
    records: list[dict[str, Any]] = []
    status = 0
    try:
        for round_ in range(1, args.rounds + 1):
            for name in CONTENDERS:
                _measure_server(args, plan, name, round_, records)
    except (ServerStartError, WarmupError) as exc:
        print(f"stopped: {exc}", file=sys.stderr)
        status = 1
    if records:
        publish(records, args.out, label=args.label, plots=args.plots, stamp=plan.stamp)
        text = (
            f"## {OURS} / vllm, {plan.mode}: ratios (geometric mean, min-max over rounds)\n\n"
            + ratio_table(records)
            + "\n## server processes (mean, min-max over rounds)\n\n"
            + process_table(records)
        )
        print(text)
        path = args.out / f"{plan.stamp}-{slug(args.label)}-ratios.md"
        path.write_text(text, encoding="utf-8")
        print(f"saved {path}\nserver logs in {plan.logs}", file=sys.stderr)
    return status


async def answers_right(root: str, model: str, max_tokens: int = 48) -> str:
    """ "right/asked" on the quality benchmark's facts, asked greedily one at a time."""
    facts = quality.load_facts()
    right = 0
    async with httpx.AsyncClient(base_url=root, timeout=120) as client:
        for fact in facts:
            right += fact.is_answered_by(
                await quality.ask(client, model, fact.question, max_tokens)
            )
    return f"{right}/{len(facts)}"


def _measure_server(
    args: argparse.Namespace, plan: Plan, name: str, round_: int, records: list[dict[str, Any]]
) -> None:
    """Start server `name`, measure every load point, stop it; add a record per point."""
    port = free_port()
    server_spec = contender(
        name,
        plan.model_dir,
        args.served_model_name,
        port,
        plan.engine,
        ours_model_dir=plan.ours_model_dir,
        extra_args=getattr(args, f"{name}_args"),
    )
    server = ServerProcess(
        server_spec.command,
        port=port,
        env=server_spec.env,
        log_path=plan.logs / f"{name}-r{round_}.log",
    )
    print(f"round {round_}: starting {name}: {' '.join(server_spec.command)}", file=sys.stderr)
    with running(server, args.start_timeout):
        time.sleep(IDLE_SETTLE_S)
        idle = tree_memory(server.pid)
        logged = parse_engine_log(server.log_path.read_text(encoding="utf-8", errors="replace"))
        info = {"server": name, "round": str(round_), "mode": plan.mode}
        info.update(plan.engine.describe() if plan.engine else {})
        info.update({f"logged_{key}": value for key, value in logged.items()})
        # Speed with wrong answers is no win: every start is scored on the same facts first.
        info["answers_right"] = asyncio.run(answers_right(server.root_url, args.served_model_name))
        label = name if args.rounds == 1 else f"{name}-r{round_}"
        # --label names the invocation's files; each record is labelled with its server.
        settings = dataclasses.replace(options.run_settings(args, extra_info=info), label=label)
        target = HttpTarget(
            ApiConfig(base_url=f"{server.root_url}/v1", model=args.served_model_name, api=args.api),
            request_timeout_s=args.request_timeout,
        )
        for index, load in enumerate(plan.loads):
            cpu_before = tree_cpu_seconds(server.pid)
            with MemorySampler(server.pid) as sampler:
                seed = (round_ - 1) * len(plan.loads) + index  # the same for both servers
                record = asyncio.run(run_http(target, plan.workload, load, settings, seed))
            record["server_process"] = {
                "startup_s": server.started_s,
                "rss_idle_mib": idle.rss_mib,
                "pss_idle_mib": idle.pss_mib,
                "rss_peak_mib": sampler.peak.rss_mib,
                "pss_peak_mib": sampler.peak.pss_mib,
                "cpu_s": tree_cpu_seconds(server.pid) - cpu_before,
                "command": server_spec.command,
            }
            records.append(record)
