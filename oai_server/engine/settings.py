"""The engine's settings, defined once, with vLLM's own names.

The server's `Settings` inherits these fields, so each is a flag, an environment
variable and a Helm value like every other setting, and the vLLM adapter reads them
from the same object: nothing copies them from one definition into another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

# What --lora-modules takes: name=path (the chart's values schema checks it too).
NAME_EQUALS_PATH = r"^[^=]+=.+$"
LoraModule = Annotated[str, Field(pattern=NAME_EQUALS_PATH)]


# What makes a directory a model to vLLM: Hugging Face's config, or Mistral's.
MODEL_CONFIG_FILES = ("config.json", "params.json")


def check_model_source(value: str) -> str:
    """`value`, unless it is written as a path (absolute, or starting with . or ~) and no
    model directory is there: that model could never load, and the start should say so at
    once, not in the engine's traceback."""
    if not value.startswith(("/", ".", "~")):
        return value
    directory = Path(value).expanduser()
    if not directory.is_dir():
        raise ValueError(f"no model directory at {value}")
    if not any((directory / name).is_file() for name in MODEL_CONFIG_FILES):
        raise ValueError(f"no model in {value}: it has no {' or '.join(MODEL_CONFIG_FILES)}")
    return value


SchedulingPolicy = Literal["fcfs", "priority"]


class EngineOptions(BaseModel):
    """How an engine runs, whatever model it holds; None means "vLLM's default" unless
    said otherwise. `EngineSettings` adds the model; the server's `Settings` adds its
    models (`--model`, repeatable) and shares these flags among them."""

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
    gpu_memory_utilization: float | None = Field(
        None, description="Share of GPU memory vLLM may take; default: vLLM's (0.92)."
    )
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
    generation_config: str = Field(
        "auto",
        description="The model's own sampling defaults for fields a request leaves out "
        "(temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens as the "
        "default max_tokens): auto reads the model's generation_config.json, vllm uses "
        "none (OpenAI's defaults), a directory reads the generation_config.json there.",
    )
    override_generation_config: dict[str, int | float] = Field(
        default_factory=dict,
        description="JSON object of sampling defaults laid over --generation-config, e.g. "
        "'{\"temperature\": 0.5}'.",
    )

    vllm_args: dict[str, Any] = Field(
        default_factory=dict,
        description="vLLM's other engine arguments by name (a JSON object, e.g. "
        '\'{"quantization": "fp8", "kv_cache_dtype": "fp8"}\'), given to the engine as '
        "vllm serve's parser gives them; on the command line, write them as vllm serve's "
        "flags (--quantization fp8).",
    )

    enable_lora: bool = Field(
        False,
        description="Serve LoRA adapters on the model (implied by --lora-modules, --lora-dir and "
        "--allow-runtime-lora); the engine then runs in eager mode.",
    )
    lora_modules: Annotated[list[LoraModule], NoDecode] = Field(
        default_factory=list,
        description="A LoRA adapter to serve as name=path (an adapter directory in PEFT "
        "layout); repeat the flag for several, or give them comma-separated in "
        "OAI_LORA_MODULES. Requests whose model is the name get the adapter.",
    )
    max_loras: int = Field(1, ge=1, description="Most distinct adapters in one engine batch.")
    max_lora_rank: int = Field(16, ge=1, description="Highest adapter rank the engine serves.")
    max_cpu_loras: int | None = Field(
        None,
        ge=1,
        description="Adapters kept loaded in memory (least recently used goes first); "
        "default: --max-loras.",
    )

    @property
    def lora_enabled(self) -> bool:
        """Whether the engine is started able to serve adapters."""
        return self.enable_lora or bool(self.lora_modules)

    def lora_paths(self) -> dict[str, str]:
        """--lora-modules as {name: path}."""
        return dict(module.split("=", 1) for module in self.lora_modules)

    @field_validator("lora_modules")
    @classmethod
    def _lora_form(cls, value: list[str]) -> list[str]:
        names: set[str] = set()
        for module in value:
            name, sep, path = module.partition("=")
            if not sep or not name or not path:
                raise ValueError(f"{module!r} is not name=path")
            if name in names:
                raise ValueError(f"two adapters are named {name!r}")
            if not Path(path).expanduser().is_dir():
                raise ValueError(f"no adapter directory at {path}")
            names.add(name)
        return value

    @field_validator("vllm_args", mode="before")
    @classmethod
    def _vllm_names(cls, value: Any) -> Any:
        """A JSON object from the environment; names as vLLM's fields spell them (the names
        are checked against vLLM's own parser by `Settings` and the models file)."""
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        if isinstance(value, dict):
            value = {str(k).replace("-", "_"): v for k, v in value.items()}
        return value

    @field_validator("generation_config")
    @classmethod
    def _config_source(cls, value: str) -> str:
        if value in ("auto", "vllm") or Path(value).is_dir():
            return value
        raise ValueError(f"must be 'auto', 'vllm' or a directory; {value!r} is none of them")

    @field_validator("override_generation_config", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """A JSON string, as `vllm serve --override-generation-config` takes it."""
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value

    def engine_options(self) -> dict[str, Any]:
        """These options by field name, as given to another engine's settings."""
        return {name: getattr(self, name) for name in EngineOptions.model_fields}


class EngineSettings(EngineOptions):
    """What one engine is started with: its model and how it runs."""

    model: str | None = Field(
        None,
        description="Hugging Face model id or local directory; "
        "default: the embedded SmolLM2-135M-Instruct.",
    )
