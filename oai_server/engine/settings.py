"""The engine's settings, defined once, with vLLM's own names.

The server's `Settings` inherits these fields, so each is a flag, an environment
variable and a Helm value like every other setting, and the vLLM adapter reads them
from the same object: nothing copies them from one definition into another.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SchedulingPolicy = Literal["fcfs", "priority"]


class EngineSettings(BaseModel):
    """What the engine is started with; None means "vLLM's default" unless said otherwise."""

    model: str | None = Field(
        None,
        description="Hugging Face model id or local directory; "
        "default: the embedded SmolLM2-135M-Instruct.",
    )
    dtype: str = Field(
        "auto",
        description="Weight and activation dtype (auto, float32, bfloat16, float16); "
        "auto is the model's own, except the embedded model on CPU: bfloat16 on CPUs with "
        "AVX-512 BF16 and no AMX, float32 on the others (bfloat16 answers it wrong on AMX "
        "kernels, and is emulated without AVX-512 BF16).",
    )
    max_model_len: int | None = Field(
        None, description="Context length; default: 2048 for the embedded model, else the model's."
    )
    enforce_eager: bool | None = Field(
        None,
        description="Skip graph compilation; "
        "default: on for CPU (saves ~70 s per start), off on GPU.",
    )
    tensor_parallel_size: int = Field(1, description="GPUs to shard the model over.")
    gpu_memory_utilization: float = Field(0.9, description="Share of GPU memory vLLM may take.")
    max_num_seqs: int | None = Field(None, description="Most sequences batched at once.")
    max_num_batched_tokens: int | None = Field(None, description="Most tokens per engine step.")
    max_num_queued_reqs: int | None = Field(
        None,
        description="Most requests waiting or running; more get a 503 at once, so clients "
        "and load balancers retry elsewhere (default: no limit).",
    )
    max_num_queued_tokens: int | None = Field(
        None, description="Most prompt tokens waiting for prefill; more get a 503 at once."
    )
    scheduling_policy: SchedulingPolicy = Field(
        "fcfs",
        description="Order of waiting requests: first come first served, or by each "
        "request's 'priority' field (lower first, then arrival).",
    )
    seed: int = Field(0, description="Engine random seed.")
    trust_remote_code: bool = Field(False, description="Allow model code from the hub.")
    cpu_kvcache_space: int | None = Field(
        None,
        description="CPU only: GiB for the KV cache (sets VLLM_CPU_KVCACHE_SPACE); "
        "default: that variable, else 2.",
    )
    cpu_threads_bind: str | None = Field(
        None,
        description="CPU only: cores for compute threads (sets VLLM_CPU_OMP_THREADS_BIND), "
        "e.g. 0-3; 'all' binds every core, 'auto' keeps vLLM's default (a core left for "
        "the front end); default: that variable, else all.",
    )
    cpu_preload: bool = Field(
        False,
        description="CPU only: preload tcmalloc and Intel's OpenMP runtime into the engine "
        "process (LD_PRELOAD), as vLLM advises; off by default: measured no faster on 2 "
        "shared cores (Intel OpenMP's threads spin between steps).",
    )
    stream_interval: int = Field(
        1,
        ge=1,
        description="Tokens per streamed chunk once a request has sent its first token "
        "(vLLM's stream_interval; the first token always goes out at once). Larger values "
        "spend less of the front end's CPU per token; the text is the same, only coarser.",
    )
