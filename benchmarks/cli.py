"""`python -m benchmarks`: argparse subcommands.

- run / sweep: drive an OpenAI-compatible server at one load point, or several in turn.
- report: the table and plots of saved records.
- ceiling: the same prompts through vLLM's AsyncLLM in-process (module `ceiling`).
- stub: a zero-cost OpenAI-like server, to try the harness or measure its own limits.
- compare: our server and `vllm serve` in turns, ratios ours / vllm (module `compare`).
- floor: the web layer's own CPU cost, with a zero-cost engine (module `floor`).
- realtime: Realtime WebSocket sessions against the same load over SSE (module `realtime`).
- store: the cost of `store: true`, and metadata-filtered lists (module `store`).
- responses: streamed `/v1/responses` against chat; rebuilding a stored context (`responses`).
- compaction: a long `previous_response_id` chain with and without compaction (`compaction`).
- tool-loop: a 20-turn tool loop over one Responses WebSocket against HTTP (`tool_loop`).
- cache: the response cache's hits against its misses, per backend (module `response_cache`).
- outages: latency and health while Redis or PostgreSQL hangs or dies (module `outages`).
- multiturn / replicas: conversations that come back, against any server or on a local Ray.
- embeddings: /v1/embeddings against `vllm serve --runner pooling`, start-up, PSS (`embeddings`).
- rerank: /rerank pairs/s and latency against `vllm serve --runner pooling` (`rerank`).
- lora: LoRA adapters mixed with the base model, and an adapter's first request (`lora`).
- bigprompts: streams' inter-chunk gaps while big prompts arrive; refusal time (`big_prompts`).
- tokenizing: long prompts' tokenizing rate in threads and in processes (`tokenizing`).

A subcommand lives in a module with a `register(subparsers)` function that sets `handler`, a
function of the parsed arguments returning the exit status; add it to `_REGISTRARS` below.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks import (
    batch,
    big_prompts,
    ceiling,
    compaction,
    compare,
    embeddings,
    floor,
    lora,
    multiturn,
    options,
    outages,
    quality,
    realtime,
    replicas,
    rerank,
    response_cache,
    responses,
    store,
    tokenizing,
    tool_loop,
)
from benchmarks.client import discover_model, make_client
from benchmarks.publish import publish, show
from benchmarks.report import DEFAULT_OUT, load_records, run_stamp
from benchmarks.runner import RunSettings, WarmupError, run_http
from benchmarks.workloads import Workload

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _register_http(subparsers: Subparsers) -> None:
    for name, sweep, summary in (
        ("run", False, "measure one load point against an OpenAI-compatible server"),
        (
            "sweep",
            True,
            "measure several load points in turn (comma-separated --concurrency or --rate)",
        ),
    ):
        parser = subparsers.add_parser(name, help=summary, description=summary)
        options.add_target_options(parser)
        options.add_load_options(parser, sweep=sweep)
        options.add_workload_options(parser)
        options.add_run_options(parser)
        parser.set_defaults(handler=_http_command)


def _http_command(args: argparse.Namespace) -> int:
    settings = options.run_settings(args, label=options.default_label(args.base_url))
    workload = Workload(options.workload_config(args), args.api)
    records: list[dict[str, Any]] = []
    status = asyncio.run(_run_points(args, workload, settings, records))
    if records:
        publish(records, args.out, label=settings.label, plots=args.plots)
    return status


async def _run_points(
    args: argparse.Namespace,
    workload: Workload,
    settings: RunSettings,
    records: list[dict[str, Any]],
) -> int:
    model = args.model
    if model is None:
        try:
            async with make_client(args.base_url, 1, args.request_timeout, args.api_key) as client:
                model = await discover_model(client)
        except (httpx.HTTPError, LookupError, ValueError) as exc:
            print(
                f"cannot list the models at {args.base_url}/models ({exc!r}); pass --model",
                file=sys.stderr,
            )
            return 1
    target = options.http_target(args, model)
    for index, load in enumerate(options.loads(args)):
        try:
            records.append(await run_http(target, workload, load, settings, seed_offset=index))
        except WarmupError as exc:
            print(f"stopped: {exc}", file=sys.stderr)
            return 1
    return 0


def _register_report(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        help="table and plots of saved result files",
        description="Print the table of saved records and draw their plots.",
    )
    parser.add_argument("files", nargs="+", type=Path, help="result JSON files")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="where to save the table and plots"
    )
    parser.add_argument(
        "--name", help="file name stem of the table and plots (default: report-<time>)"
    )
    parser.add_argument("--no-plots", dest="plots", action="store_false")
    parser.set_defaults(handler=_report_command)


def _report_command(args: argparse.Namespace) -> int:
    saved = show(
        load_records(args.files), args.out, args.name or f"report-{run_stamp()}", plots=args.plots
    )
    for path in saved:
        print(f"saved {path}", file=sys.stderr)
    return 0


def _register_stub(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "stub",
        help="serve a zero-cost OpenAI-like streaming stub on 127.0.0.1",
        description="A stub server answering with max_tokens tokens at a scripted pace.",
    )
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--first-token-delay", type=float, default=0.02, metavar="S")
    parser.add_argument("--token-delay", type=float, default=0.005, metavar="S")
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument(
        "--fail-every", type=int, default=0, metavar="N", help="answer every N-th request with 500"
    )
    parser.set_defaults(handler=_stub_command)


def _stub_command(args: argparse.Namespace) -> int:
    import uvicorn

    from benchmarks.stub_server import StubConfig, create_stub_app

    config = StubConfig(
        first_token_delay=args.first_token_delay,
        token_delay=args.token_delay,
        tokens_per_chunk=args.tokens_per_chunk,
        fail_every=args.fail_every,
    )
    uvicorn.run(create_stub_app(config), host="127.0.0.1", port=args.port, log_level="warning")
    return 0


_REGISTRARS: Sequence[Callable[[Subparsers], None]] = (
    _register_http,
    _register_report,
    ceiling.register,
    multiturn.register,
    replicas.register,
    _register_stub,
    compare.register,
    floor.register,
    quality.register,
    realtime.register,
    responses.register,
    compaction.register,
    store.register,
    response_cache.register,
    outages.register,
    embeddings.register,
    rerank.register,
    batch.register,
    lora.register,
    big_prompts.register,
    tokenizing.register,
    tool_loop.register,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Load tests for OpenAI-compatible chat/completions servers.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in _REGISTRARS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    status: int = args.handler(args)
    return status
