"""Every setting of the server, defined once.

The command line (`--max-model-len`), the environment (`OAI_MAX_MODEL_LEN`) and the
Helm chart's values all map onto this one class. Engine settings keep vLLM's own
names, so a user of `vllm serve` already knows them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

EMBEDDED_MODEL_NAME = "smollm2-135m-instruct"


class Settings(BaseSettings):
    """oai-server: an OpenAI-compatible chat and completions server on vLLM."""

    model_config = SettingsConfigDict(
        env_prefix="OAI_",
        cli_prog_name="oai-server",
        cli_kebab_case=True,
        cli_implicit_flags=True,
        cli_hide_none_type=True,
        cli_avoid_json=True,
        extra="ignore",
    )

    # --- HTTP -----------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, description="Port to listen on.")
    api_key: str | None = Field(
        None, description="If set, clients must send 'Authorization: Bearer <key>' (else 401)."
    )
    max_request_bytes: int = Field(
        4 * 1024 * 1024, description="Largest request body accepted (else 413)."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Log level."
    )

    # --- model ----------------------------------------------------------------
    model: str | None = Field(
        None,
        description="Hugging Face model id or local directory; "
        "default: the embedded SmolLM2-135M-Instruct.",
    )
    served_model_name: str | None = Field(
        None,
        description="Model id clients use; default: the --model value, or smollm2-135m-instruct.",
    )
    chat_template: Path | None = Field(
        None, description="A Jinja chat template file that replaces the model's own."
    )
    tool_call_parser: Literal["hermes", "none"] = Field(
        "hermes",
        description="How tool calls are read from free text for tool_choice 'auto' "
        "(hermes: <tool_call>{json}</tool_call>); 'required' and named tools work on any model.",
    )
    cache_dir: Path = Field(
        Path.home() / ".cache" / "oai-server",
        description="Where the embedded model is converted once and kept.",
    )

    # --- engine (vLLM's own flag names) ---------------------------------------
    dtype: str = Field(
        "auto",
        description="Weight and activation dtype (auto, float32, bfloat16, float16); "
        "auto is vLLM's choice (bfloat16 for the embedded model).",
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

    # --- Ray Serve (oai_server.ray_serve; ignored by the plain server) ------------
    ray_min_replicas: int = Field(1, ge=0, description="Ray Serve: fewest replicas kept.")
    ray_max_replicas: int = Field(1, ge=1, description="Ray Serve: most replicas started.")
    ray_target_ongoing_requests: float = Field(
        16.0,
        gt=0,
        description="Ray Serve: requests in flight per replica the autoscaler aims for "
        "(running plus queued for the replica).",
    )
    ray_max_ongoing_requests: int = Field(
        256,
        ge=1,
        description="Ray Serve: most requests sent to one replica at once; more wait in the proxy.",
    )
    ray_upscale_delay_s: float = Field(
        30.0,
        ge=0,
        description="Ray Serve: load must stay high this long before a replica is added.",
    )
    ray_downscale_delay_s: float = Field(
        600.0, ge=0, description="Ray Serve: load must stay low this long before one is removed."
    )
    ray_num_cpus: float = Field(1.0, ge=0, description="Ray Serve: CPUs each replica reserves.")
    ray_num_gpus: float = Field(
        0.0,
        ge=0,
        description="Ray Serve: GPUs per engine worker (1 on a GPU cluster); with "
        "--tensor-parallel-size N > 1 a replica reserves a placement group of N such bundles.",
    )
    ray_graceful_shutdown_timeout_s: float = Field(
        60.0,
        ge=0,
        description="Ray Serve: how long a stopping replica lets its in-flight requests finish.",
    )

    @property
    def model_name(self) -> str:
        """The id clients address the model by."""
        if self.served_model_name:
            return self.served_model_name
        return self.model or EMBEDDED_MODEL_NAME
