"""What the vLLM engine is started with: its arguments, and the CPU backend's environment.

Kept apart from `vllm.py` (the adapter) and free of vllm imports: it only turns our
settings into vLLM's engine arguments and `VLLM_CPU_*` / `LD_PRELOAD` variables.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from oai_server.engine.settings import EngineSettings
from oai_server.engine.vllm import cpu

logger = logging.getLogger(__name__)

# The cores vLLM's CPU backend pins its compute threads to (`--cpu-threads-bind`).
THREADS_BIND_VARIABLE = "VLLM_CPU_OMP_THREADS_BIND"


def configure_cpu(options: EngineSettings) -> None:
    """Set the CPU backend's environment before the engine process is spawned.

    A setting given explicitly wins over the environment; an unset one leaves what the
    environment says, else takes our default.
    """
    if options.cpu_kvcache_space is not None:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(options.cpu_kvcache_space)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    bind = options.cpu_threads_bind
    if bind == "auto":
        os.environ.pop(THREADS_BIND_VARIABLE, None)
        return
    if bind is None and THREADS_BIND_VARIABLE in os.environ:
        return
    if bind in (None, "all"):
        # vLLM keeps a core for the front end by default; on small machines the
        # engine is the bottleneck, and every core computing gave 1.4x the tokens/s.
        bind = f"0-{(os.cpu_count() or 1) - 1}"
    os.environ[THREADS_BIND_VARIABLE] = bind


def preload_for(options: EngineSettings) -> str | None:
    """The LD_PRELOAD for the engine process with --cpu-preload: tcmalloc and Intel OpenMP."""
    if not options.cpu_preload:
        return None
    libraries = cpu.find_preload_libraries()
    names = {lib.name for lib in libraries}
    if cpu.TCMALLOC not in names:
        logger.warning(
            "--cpu-preload: tcmalloc not found (Debian/Ubuntu: apt-get install "
            "libtcmalloc-minimal4)"
        )
    if cpu.IOMP not in names:
        logger.warning("--cpu-preload: Intel OpenMP not found (pip install intel-openmp)")
    value = cpu.preload_value(libraries, os.environ.get("LD_PRELOAD"))
    if value is not None:
        logger.debug("engine preloads %s", value)
    return value


@contextlib.contextmanager
def environment(name: str, value: str | None) -> Iterator[None]:
    """`name` set to `value` in os.environ inside the block (nothing done for None)."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


# The worker extension that fixes vLLM's CPU LoRA ops in the engine core (lora_ops.py).
LORA_SLOT_FIX = "oai_server.engine.vllm.lora_ops.LoRASlotFix"


def engine_args(
    options: EngineSettings,
    on_cpu: bool,
    served_model_name: str | None = None,
    *,
    lora_slot_fix: bool = False,
) -> dict[str, Any]:
    """vLLM's engine arguments for `options`; `served_model_name` is the id clients use.
    `lora_slot_fix`: on CPU, vLLM's LoRA ops can be fixed in the engine core
    (lora_ops.py); otherwise base-model requests need the null adapter's slot."""
    enforce_eager = options.enforce_eager
    if enforce_eager is None:
        enforce_eager = on_cpu
    args: dict[str, Any] = {
        # Compact JSON in structured output and tool calls: small models otherwise wander
        # into endless runs of whitespace, and OpenAI's own JSON is compact too. Only
        # xgrammar and guidance can do that; guidance covers the most of JSON Schema.
        "structured_outputs_config": {"backend": "guidance", "disable_any_whitespace": True},
        "model": options.model,
        # vLLM labels its metrics (model_name) with this, as under `vllm serve
        # --served-model-name`; left unset it would be the weights' path on this host.
        "served_model_name": served_model_name,
        "dtype": options.dtype,
        "enforce_eager": enforce_eager,
        "seed": options.seed,
        "scheduling_policy": options.scheduling_policy,
        "trust_remote_code": options.trust_remote_code,
        "max_model_len": options.max_model_len,
        "max_num_seqs": options.max_num_seqs,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "max_num_queued_reqs": options.max_num_queued_reqs,
        "max_num_queued_tokens": options.max_num_queued_tokens,
        "stream_interval": options.stream_interval,
        "generation_config": options.generation_config,
        "override_generation_config": options.override_generation_config or None,
        # vLLM's progress bar while it loads the weights (under a second on CPU): debug only.
        "use_tqdm_on_load": logger.isEnabledFor(logging.DEBUG),
    }
    if options.lora_enabled:
        # On CPU, without the fix, one slot more holds the null adapter of base-model
        # requests (vllm_lora.py).
        extra = 1 if on_cpu and not lora_slot_fix else 0
        if on_cpu and lora_slot_fix:
            args["worker_extension_cls"] = LORA_SLOT_FIX
        args["enable_lora"] = True
        args["max_loras"] = options.max_loras + extra
        args["max_lora_rank"] = options.max_lora_rank
        if options.max_cpu_loras is not None:
            args["max_cpu_loras"] = options.max_cpu_loras + extra
    if not on_cpu:
        args["tensor_parallel_size"] = options.tensor_parallel_size
        args["gpu_memory_utilization"] = options.gpu_memory_utilization
    # vLLM's other engine arguments, as its own parser read them: given, so they win.
    args.update(options.vllm_args)
    return {k: v for k, v in args.items() if v is not None}
