"""`floor`: what the web layer alone costs, in server CPU time per request and per token.

Each app runs in turn in a uvicorn process of its own (`benchmarks.asgi_serve`, same settings
for all) with nothing computing behind it, and gets the same closed loop of streamed requests:

- ours: this project's app, `create_app(Settings(), FakeEngine(...))`: tokens cost nothing, one
  per engine step, so all that is measured is validation, templating, tokenizing, the stream
  state machine, JSON and SSE framing, and the ASGI server. Its data directory is a fresh one
  (`OAI_DATA_DIR`: the default SQLite store, and the batch runner on it, as on a new install).
- raw: raw ASGI sending SSE bytes built in advance (`benchmarks.stub_server` with no pace), of
  the same shape and count: the ASGI server's own cost, the floor under any framework.
- ours-prod: ours with the production features on: API keys, rate limits (in memory, never
  reached), the response cache (in memory, every request a miss); the store stays off (no
  request asks for `store`). Its difference to `ours` is what those features cost.
- ours-reasoning, ours-tools: ours with a parser on, vLLM's `deepseek_r1` reasoning parser
  over an R1-style answer, or vLLM's `hermes` tool-call parser over an answer that is one
  call (its requests carry a tool): what a parser costs per chunk. ours-reasoning-qwen3,
  ours-tools-qwen3-coder, ours-tools-llama3: the same with vLLM's `qwen3` reasoning
  parser, or its `qwen3_coder` or `llama3_json` tool-call parser, in that family's format.
- before-ours, before-ours-prod (with `--before DIR`): the same apps served from another
  checkout of the project (say, `git worktree add /tmp/floor-before main`), so a change is
  measured against the code before it in the same turns.

The apps take turns (A B A B with `--rounds 2`), so a machine whose speed drifts (other work
on it) shifts every app alike, and the ratios of one run hold.

The load generator shares the machine, so wall times say little: the measure is the CPU time
(user + system, from /proc) the server process used during the measured requests, which a
warm-up pass precedes. On a machine of two CPUs or more the server runs on a CPU of its own
and the load generator on the others (`taskset`; `--no-pin` shares them all): each app's
code then stays in its core's caches, as an API server's does on a deployment's own core,
and the same app measured twice differs less.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import options
from benchmarks.client import ApiConfig
from benchmarks.loops import LoadSpec
from benchmarks.proc_stats import tree_cpu_seconds
from benchmarks.publish import publish
from benchmarks.report import run_stamp, slug
from benchmarks.runner import HttpTarget, RunSettings, run_http
from benchmarks.server_process import ServerProcess, free_port, running
from benchmarks.workloads import Workload

MODEL = "smollm2-135m-instruct"  # what Settings() serves; the other apps list it too
APPS: Mapping[str, str] = {
    "ours": "benchmarks.floor:make_fake_app",
    "ours-cache": "benchmarks.floor:make_fake_app_cached",
    "ours-prod": "benchmarks.floor:make_fake_app_production",
    "ours-reasoning": "benchmarks.floor:make_fake_app_reasoning",
    "ours-reasoning-qwen3": "benchmarks.floor:make_fake_app_reasoning_qwen3",
    "ours-tools": "benchmarks.floor:make_fake_app_tools",
    "ours-tools-qwen3-coder": "benchmarks.floor:make_fake_app_tools_qwen3_coder",
    "ours-tools-llama3": "benchmarks.floor:make_fake_app_tools_llama3",
    "raw": "benchmarks.floor:make_raw_app",
}
BASELINE = "raw"
# The key `ours-prod` requires; the load generator sends it to every app (the others ignore it).
API_KEY = "sk-floor"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
# What an app's requests carry besides the workload's (a tool, for a tool-call answer).
EXTRA_BODY: Mapping[str, Mapping[str, Any]] = {
    name: {"tools": [WEATHER]}
    for name in ("ours-tools", "ours-tools-qwen3-coder", "ours-tools-llama3")
}


def make_fake_app() -> Any:
    """Our app on the fake engine; with `ignore_eos` it repeats "tok" up to `max_tokens`."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    return create_app(Settings(), FakeEngine(reply="tok"))


def make_fake_app_cached() -> Any:
    """`make_fake_app` with the in-memory response cache on: every request a miss (its
    prompts differ), so the difference to `ours` is what a miss costs the cache."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    return create_app(Settings(response_cache="memory"), FakeEngine(reply="tok"))


def make_fake_app_reasoning() -> Any:
    """`make_fake_app` with vLLM's `deepseek_r1` reasoning parser on, answering as an R1
    distill does (no opening tag): 127 tokens of thinking, `</think>`, then the answer, so
    at 256 chunks half go out as `delta.reasoning` and half as content, every one through
    vLLM's streaming parser. Its difference to `ours` is what the parser costs."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    pieces = ["tok"] * 127 + ["</think>"] + ["tok"] * 128
    # "tok" a token of its own, as a real tokenizer's word: one id per step, not three bytes.
    engine = FakeEngine(tokens=pieces, added_tokens=("<think>", "</think>", "tok"))
    return create_app(Settings(reasoning_parser="deepseek_r1"), engine)


def make_fake_app_reasoning_qwen3() -> Any:
    """`make_fake_app_reasoning` with vLLM's `qwen3` reasoning parser, answering as Qwen3
    does when thinking: `<think>`, 126 tokens of thinking, `</think>`, then the answer."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    pieces = ["<think>"] + ["tok"] * 126 + ["</think>"] + ["tok"] * 128
    engine = FakeEngine(tokens=pieces, added_tokens=("<think>", "</think>", "tok"))
    return create_app(Settings(reasoning_parser="qwen3"), engine)


def _tools_app(parser: str, tags: Sequence[str], call: str) -> Any:
    """Our app with vLLM's tool-call parser `parser` on, answering the one call `call`
    (its `%s`: the argument's value) whose arguments are most of the answer: at 256 chunks,
    all but the head's and tail's go out as fragments of its arguments."""
    from transformers import AutoTokenizer

    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.engine.vllm.holder import VLLMTokenizer
    from oai_server.models.embedded_model import ensure_embedded_model
    from oai_server.settings import Settings

    # vLLM's tool parsers need a real tokenizer: the embedded model's, with the family's tags.
    tokenizer = AutoTokenizer.from_pretrained(
        ensure_embedded_model(Path.home() / ".cache" / "oai-server", "float32")
    )
    if tags:
        tokenizer.add_special_tokens({"additional_special_tokens": list(tags)})
    ids = tokenizer.encode(call % (" tok" * 235), add_special_tokens=False)
    pieces = [str(tokenizer.decode([token])) for token in ids]
    engine = FakeEngine(tokens=pieces, model_tokenizer=VLLMTokenizer(tokenizer))
    return create_app(Settings(tool_call_parser=parser), engine)


def make_fake_app_tools() -> Any:
    """`make_fake_app` with vLLM's `hermes` tool-call parser on (`tool_choice` auto: the
    requests carry a tool), answering one call whose arguments are the rest of the answer:
    at 256 chunks, 235 go out as fragments of its arguments. Its difference to `ours` is
    what the parser costs."""
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "%s"}}\n</tool_call>'
    return _tools_app("hermes", ("<tool_call>", "</tool_call>"), call)


def make_fake_app_tools_qwen3_coder() -> Any:
    """`make_fake_app_tools` in Qwen3-Coder's XML format, vLLM's `qwen3_coder` parser on."""
    call = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n%s\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    return _tools_app("qwen3_coder", ("<tool_call>", "</tool_call>"), call)


def make_fake_app_tools_llama3() -> Any:
    """`make_fake_app_tools` in Llama 3's JSON format, vLLM's `llama3_json` parser on."""
    call = '{"name": "get_weather", "parameters": {"city": "%s"}}'
    return _tools_app("llama3_json", ("<|python_tag|>", "<|eom_id|>"), call)


def make_fake_app_production() -> Any:
    """`make_fake_app` with what a production deployment turns on: a key, limits that are
    counted but never reached, and the response cache (every request a miss)."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    settings = Settings(
        api_key=[API_KEY],
        rate_limit_rpm=1_000_000_000,
        rate_limit_tpm=1_000_000_000_000,
        response_cache="memory",
    )
    return create_app(settings, FakeEngine(reply="tok"))


def make_raw_app() -> Any:
    from benchmarks.stub_server import StubConfig, create_stub_app

    # No pace, and a fixed prompt count: every request's bytes were built before it came.
    return create_stub_app(
        StubConfig(first_token_delay=0.0, token_delay=0.0, model=MODEL, prompt_tokens=30)
    )


BEFORE = "before-"


def measure_app(
    name: str,
    workload: Workload,
    load: LoadSpec,
    settings: RunSettings,
    *,
    warmup: int,
    log_dir: Path,
    continuous_usage: bool = False,
    checkout: Path | None = None,
    server_cpus: Sequence[int] = (),
) -> dict[str, Any]:
    """Serve app `name`, warm it up, measure the server's CPU time over a run; its record.

    A name starting with `before-` is that app served from `checkout`; `server_cpus`: the
    CPUs the server runs on (none: any).
    """
    app = name.removeprefix(BEFORE)
    factory = APPS[app]
    port = free_port()
    command = [sys.executable, "-m", "benchmarks.asgi_serve", "--factory", factory]
    # Whatever an earlier server left in the user's data directory is not measured.
    data_dir = tempfile.TemporaryDirectory(prefix="oai-floor-")
    env = {**os.environ, "OAI_DATA_DIR": data_dir.name}
    if app != name:
        if checkout is None:
            raise ValueError(f"{name}: no checkout to serve it from")
        # -P: the other checkout's packages, not those of the working directory.
        command.insert(1, "-P")
        env["PYTHONPATH"] = str(checkout)
    if server_cpus:
        command = ["taskset", "--cpu-list", ",".join(map(str, server_cpus)), *command]
    server = ServerProcess(
        [*command, "--port", str(port)],
        port=port,
        log_path=log_dir / f"floor-{name}.log",
        # Open without a key in our app; the others answer /v1/models.
        ready_path="/health" if app.startswith("ours") else "/v1/models",
        env=env,
    )
    api = ApiConfig(
        base_url=f"{server.root_url}/v1",
        model=MODEL,
        api=workload.api,
        continuous_usage=continuous_usage,
        extra_body=EXTRA_BODY.get(app, {}),
    )
    target = HttpTarget(api, api_key=API_KEY)
    measured = dataclasses.replace(settings, label=name, warmup=0)
    with data_dir, running(server, timeout_s=120):
        if warmup:
            warm = dataclasses.replace(measured, label=f"{name} warm-up", num_requests=warmup)
            asyncio.run(run_http(target, workload, load, warm, seed_offset=1))
        before = tree_cpu_seconds(server.pid)
        record = asyncio.run(run_http(target, workload, load, measured))
        cpu_s = tree_cpu_seconds(server.pid) - before
    metrics = record["metrics"]
    record["server_process"] = {
        "factory": factory,
        "cpu_s": cpu_s,
        "cpu_us_per_request": 1e6 * cpu_s / metrics["completed"] if metrics["completed"] else None,
        "cpu_us_per_token": 1e6 * cpu_s / metrics["output_tokens"]
        if metrics["output_tokens"]
        else None,
    }
    return record


def floor_table(records: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: per app, CPU time per request and per token, and the ratio to the raw floor."""
    by_app = {r["label"]: r for r in records}
    base = by_app.get(BASELINE, {}).get("server_process", {}).get("cpu_us_per_request")
    lines = [
        "| app | ok | tokens | server CPU s | CPU us/request | CPU us/token | x raw | wall req/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, record in by_app.items():
        proc, metrics = record["server_process"], record["metrics"]
        per_request, per_token = proc["cpu_us_per_request"], proc["cpu_us_per_token"]
        ratio = f"{per_request / base:.2f}" if base and per_request else "-"
        cells = [
            name,
            str(metrics["completed"]),
            str(metrics["output_tokens"]),
            f"{proc['cpu_s']:.2f}",
            f"{per_request:,.0f}" if per_request else "-",
            f"{per_token:,.1f}" if per_token else "-",
            ratio,
            f"{metrics['request_throughput']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _apps(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in APPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"apps are among {', '.join(APPS)}; got {text!r}")
    return names


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `floor` subcommand."""
    parser = subparsers.add_parser(
        "floor",
        help="the web layer's own CPU cost per request, ours against raw ASGI (zero-cost engine)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--apps",
        type=_apps,
        default=["ours", "raw"],
        help=f"of {', '.join(APPS)} (default: ours,raw)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="also serve each of our apps from the checkout in DIR (as before-ours, ...), "
        "in the same turns: a change measured against the code before it",
    )
    parser.add_argument("--api", choices=("completions", "chat"), default="chat")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument(
        "--continuous-usage",
        action="store_true",
        help="ask for usage in every chunk (vLLM's continuous_usage_stats); by default the "
        "stream is what OpenAI clients ask for: usage only at the end",
    )
    parser.add_argument(
        "--short-len",
        type=int,
        default=16,
        help="a second, short output length: the two runs separate the cost per request "
        "from the cost per chunk (default: %(default)s)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every app this many times, taking turns (A B A B); each app's costs "
        "are fitted through the CPU time of all its rounds (default: %(default)s)",
    )
    parser.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="let the server and the load generator share every CPU (by default the server "
        "has a CPU of its own, where there are two or more and taskset is installed)",
    )
    options.add_workload_options(parser)
    options.add_run_options(parser, default_label="floor")
    parser.set_defaults(handler=_command, num_requests=400, warmup=16)


@contextlib.contextmanager
def pinned(pin: bool) -> Iterator[tuple[int, ...]]:
    """With `pin`, give the servers the last CPU this thread may use and keep the rest for
    it (the load generator) until the block ends; yields the servers' CPUs, none where there
    is one CPU or no taskset (or without `pin`)."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2 or shutil.which("taskset") is None:
        yield ()
        return
    os.sched_setaffinity(0, cpus[:-1])
    try:
        yield (cpus[-1],)
    finally:
        os.sched_setaffinity(0, cpus)


def split_costs(short: Mapping[str, Any], long: Mapping[str, Any]) -> tuple[float, float]:
    """(fixed CPU us per request, marginal CPU us per streamed chunk) from runs at two lengths.

    CPU time per request is linear in the chunks streamed: a straight line through the
    two runs separates what each request costs (parsing, templating, routing) from what
    each further chunk costs.
    """
    points = []
    for record in (short, long):
        metrics = record["metrics"]
        chunks = metrics["output_tokens"] / metrics["completed"]
        points.append((chunks, record["server_process"]["cpu_us_per_request"]))
    (x0, y0), (x1, y1) = points
    per_chunk = (y1 - y0) / (x1 - x0)
    return y0 - per_chunk * x0, per_chunk


def pooled(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One app's rounds at one length as one run: their CPU time and requests summed."""
    completed = sum(r["metrics"]["completed"] for r in records)
    cpu_s = sum(r["server_process"]["cpu_s"] for r in records)
    return {
        "metrics": {
            "completed": completed,
            "output_tokens": sum(r["metrics"]["output_tokens"] for r in records),
        },
        "server_process": {"cpu_s": cpu_s, "cpu_us_per_request": 1e6 * cpu_s / completed},
    }


def split_table(costs: Mapping[str, tuple[float, float]]) -> str:
    base_request, base_chunk = costs.get(BASELINE, (0.0, 0.0))
    lines = [
        "| app | CPU us per request (fixed) | x raw | CPU us per streamed chunk | x raw |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (request, chunk) in costs.items():
        request_ratio = f"{request / base_request:.2f}" if base_request else "-"
        chunk_ratio = f"{chunk / base_chunk:.2f}" if base_chunk else "-"
        lines.append(f"| {name} | {request:,.0f} | {request_ratio} | {chunk:.2f} | {chunk_ratio} |")
    return "\n".join(lines) + "\n"


def _served_by(checkout: Path, name: str) -> bool:
    """Whether the other checkout has our app `name` (an app added since is measured here only)."""
    if not name.startswith("ours"):
        return False
    function = APPS[name].rpartition(":")[2]
    source = (checkout / "benchmarks" / "floor.py").read_text(encoding="utf-8")
    return f"def {function}(" in source


def _command(args: argparse.Namespace) -> int:
    settings = options.run_settings(args)
    stamp = run_stamp()
    lengths = (args.short_len, args.output_len)
    if not 0 < args.short_len < args.output_len:
        raise SystemExit("floor: --short-len must be above 0 and below --output-len")
    if args.rounds < 1:
        raise SystemExit("floor: --rounds must be 1 or more")
    names = list(args.apps)
    if args.before is not None:
        if not (args.before / "oai_server" / "__init__.py").is_file():
            # Python would fall back on whatever copy is installed, and measure that.
            raise SystemExit(f"floor: --before {args.before} is not a checkout of this project")
        names += [BEFORE + name for name in args.apps if _served_by(args.before, name)]
    # runs[name][i]: that app's records at lengths[i], one per round.
    runs: dict[str, list[list[dict[str, Any]]]] = {name: [[], []] for name in names}
    with pinned(args.pin) as server_cpus:
        for _ in range(args.rounds):
            for i, length in enumerate(lengths):
                config = dataclasses.replace(options.workload_config(args), output_len=length)
                workload = Workload(config, args.api)
                for name in names:
                    record = measure_app(
                        name,
                        workload,
                        LoadSpec(concurrency=args.concurrency),
                        settings,
                        warmup=args.warmup,
                        log_dir=args.out / f"{stamp}-floor-logs",
                        continuous_usage=args.continuous_usage,
                        checkout=args.before,
                        server_cpus=server_cpus,
                    )
                    runs[name][i].append(record)
    records = [long[-1] for _, long in runs.values()]
    publish(records, args.out, label=args.label, plots=args.plots, stamp=stamp)
    costs = {name: split_costs(pooled(short), pooled(long)) for name, (short, long) in runs.items()}
    text = (
        f"## server CPU time, fixed per request and per streamed chunk "
        f"(fit through {lengths[0]} and {lengths[1]} chunks)\n\n"
        + split_table(costs)
        + f"\n## server CPU time at {lengths[1]} chunks per request (lower is better)\n\n"
        + floor_table(records)
    )
    print(text)
    path = args.out / f"{stamp}-{slug(args.label)}-cpu.md"
    path.write_text(text, encoding="utf-8")
    print(f"saved {path}", file=sys.stderr)
    return 0
