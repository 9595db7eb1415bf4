"""The ceiling: the same token-id prompts through vLLM's AsyncLLM in-process, no HTTP between.

Its records have the same metrics as HTTP runs, so "server / ceiling" ratios compare like with like.
A step of the engine plays the part of a chunk: it carries `len(token_ids)` new tokens.
vLLM is imported only when the engine is built: it is heavy, and the rest of the harness
needs none of it.
vLLM spawns its engine core process, so whatever calls `run_ceiling` needs a `__main__` guard.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import itertools
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from benchmarks import options
from benchmarks.loops import LoadSpec
from benchmarks.publish import publish
from benchmarks.records import ENGINE_ERROR, RequestRecord
from benchmarks.runner import RunSettings, finish, measure
from benchmarks.workloads import RequestSpec, Workload

if TYPE_CHECKING:
    from vllm.v1.engine.async_llm import AsyncLLM

# Set them as the server under comparison has them: VLLM_CPU_OMP_THREADS_BIND=0-1 (both cores
# compute) made the engine about 40 % faster than the default on a 2-core machine.
RECORDED_ENV = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND", "OMP_NUM_THREADS")
Dtype = Literal["auto", "half", "float16", "bfloat16", "float", "float32"]
_request_ids = itertools.count()


@dataclass
class EngineConfig:
    """The engine arguments that matter for a CPU comparison; the rest keep vLLM's defaults."""

    model_dir: str
    max_model_len: int = 2048
    dtype: Dtype = "auto"
    enforce_eager: bool = True

    def describe(self) -> dict[str, str]:
        """The engine settings, and the environment variables that change CPU speed, as recorded."""
        settings = {
            "max_model_len": str(self.max_model_len),
            "dtype": self.dtype,
            "enforce_eager": str(self.enforce_eager),
        }
        settings.update({name: os.environ[name] for name in RECORDED_ENV if name in os.environ})
        return settings


def build_engine(config: EngineConfig) -> AsyncLLM:
    """Start an AsyncLLM on `config.model_dir` (tens of seconds on a CPU)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    args = AsyncEngineArgs(
        model=config.model_dir,
        max_model_len=config.max_model_len,
        dtype=config.dtype,
        enforce_eager=config.enforce_eager,
    )
    return AsyncLLM.from_engine_args(args)


async def send_to_engine(engine: AsyncLLM, spec: RequestSpec) -> RequestRecord:
    """Generate for one spec and record when each step's tokens came out."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    if spec.prompt_token_ids is None:
        raise ValueError("the ceiling needs token-id prompts: give the workload a tokenizer")
    params = SamplingParams(
        max_tokens=spec.max_tokens,
        ignore_eos=spec.ignore_eos,
        temperature=1.0 if spec.temperature is None else spec.temperature,
        output_kind=RequestOutputKind.DELTA,
    )
    prompt = TokensPrompt(prompt_token_ids=spec.prompt_token_ids)
    record = RequestRecord(send_time=time.perf_counter(), prompt_tokens=len(spec.prompt_token_ids))
    total = 0
    try:
        async for output in engine.generate(prompt, params, f"ceiling-{next(_request_ids)}"):
            at = time.perf_counter()
            tokens = len(output.outputs[0].token_ids) if output.outputs else 0
            if tokens:
                record.chunk_times.append(at)
                record.chunk_tokens.append(tokens)
                total += tokens
        record.completion_tokens = total
    except Exception as exc:  # noqa: BLE001 - any engine failure is one failed request, as over HTTP
        record.error, record.error_detail = ENGINE_ERROR, repr(exc)
    record.end_time = time.perf_counter()
    return record


async def run_ceiling(
    engine_config: EngineConfig, workload: Workload, loads: list[LoadSpec], settings: RunSettings
) -> list[dict[str, Any]]:
    """One record per load point, from one engine, with the prompts `run_http` would send."""
    target = {"base_url": None, "api": "engine", "model": engine_config.model_dir}
    engine = build_engine(engine_config)
    send = functools.partial(send_to_engine, engine)
    try:
        records = []
        for index, load in enumerate(loads):
            specs = workload.requests(settings.warmup + settings.num_requests, seed_offset=index)
            result = await measure(send, specs, load, settings, seed=index)
            records.append(finish(result, load, settings, target, workload.config.describe()))
        return records
    finally:
        await asyncio.to_thread(engine.shutdown)
        # AsyncLLM.__del__ shuts down once more: let it run now, as at exit it fails noisily.
        del engine, send
        gc.collect()


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `ceiling` subcommand."""
    parser = subparsers.add_parser(
        "ceiling",
        help="the same prompts through vLLM's AsyncLLM in-process (no HTTP): the upper bound",
        description="Measure vLLM's AsyncLLM in-process with the prompts and metrics of an HTTP "
        "run. "
        "Give --concurrency or --rate a comma-separated list to sweep with one engine.",
    )
    parser.add_argument(
        "--model-dir",
        required=True,
        help="model directory (also the tokenizer, unless --tokenizer)",
    )
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--dtype", choices=get_args(Dtype), default="auto")
    parser.add_argument(
        "--no-enforce-eager",
        dest="enforce_eager",
        action="store_false",
        help="let vLLM compile the model (slower start, faster steps)",
    )
    parser.add_argument(
        "--api",
        choices=("completions", "chat"),
        default="completions",
        help="make the token ids as this API would: plain prompt, or the chat template",
    )
    options.add_load_options(parser, sweep=True)
    options.add_workload_options(parser)
    options.add_run_options(parser, default_label="engine-direct")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    config = EngineConfig(args.model_dir, args.max_model_len, args.dtype, args.enforce_eager)
    workload = Workload(options.workload_config(args, tokenizer_default=args.model_dir), args.api)
    settings = options.run_settings(args, extra_info=config.describe())
    records = asyncio.run(run_ceiling(config, workload, options.loads(args), settings))
    publish(records, args.out, label=settings.label, plots=args.plots)
    return 0
