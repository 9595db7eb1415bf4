"""What vLLM's CPU backend will run on this CPU, and the choices made for it before it starts.

vLLM picks its CPU kernels from the CPU's features, with no switch of its own:

- attention (`vllm/v1/attention/backends/cpu_attn.py::_get_attn_isa`): "amx" when the CPU has
  AMX tiles, the dtype is bfloat16 and the KV block size a multiple of 32; else "vec" (AVX-512
  / AVX2) when the block size is a multiple of 32; else "vec16".
- matrix products (`vllm/model_executor/layers/utils.py::dispatch_cpu_unquantized_gemm`):
  with AMX and bfloat16, weights of 1 MiB or less (SmolLM2's o_proj) go to SGLang's AMX
  kernel, the rest to oneDNN (which itself uses AMX there); otherwise oneDNN.

So float32 runs the same kernels on every x86-64 CPU, and bfloat16 runs different ones on
CPUs with AMX. The embedded model (a 135M model dequantized from 4 bits) answers greedily
right in bfloat16 on the "vec" kernels and wrong on the AMX ones (see benchmarks/quality.py
and the README's dtype section), so its default dtype is chosen here per CPU.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# The flags that decide vLLM's kernels, in the order the test header prints them.
KERNEL_FLAGS = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f", "avx2")
# vLLM's default KV block size on CPU.
DEFAULT_CPU_BLOCK_SIZE = 128

TCMALLOC = "libtcmalloc_minimal.so.4"
IOMP = "libiomp5.so"
_TCMALLOC_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The feature flags of the first CPU in `cpuinfo` (empty where it cannot be read)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def has_amx(flags: Iterable[str]) -> bool:
    """Whether vLLM will take its AMX kernels in bfloat16 (torch asks for the tiles)."""
    found = set(flags)
    return "amx_bf16" in found or "amx_tile" in found


@dataclass(frozen=True)
class KernelPlan:
    """The dtype the engine will compute in, the kernels vLLM will pick, and why."""

    dtype: str
    attention: str
    gemm: str
    reason: str

    def describe(self) -> str:
        return f"dtype {self.dtype}, attention kernel {self.attention}, matmul {self.gemm}"


def attention_kernel(dtype: str, flags: Iterable[str], block_size: int | None) -> str:
    """The attention ISA vLLM picks (SmolLM2's head size, 64, is a multiple of 32)."""
    block = block_size or DEFAULT_CPU_BLOCK_SIZE
    if has_amx(flags) and dtype == "bfloat16" and block % 32 == 0:
        return "amx"
    return "vec" if block % 32 == 0 else "vec16"


def gemm_kernel(dtype: str, flags: Iterable[str]) -> str:
    found = set(flags)
    if has_amx(found) and dtype == "bfloat16":
        return "oneDNN (AMX) + SGLang AMX for small weights"
    if dtype == "bfloat16" and "avx512_bf16" not in found:
        return "oneDNN (bfloat16 emulated)"
    return "oneDNN"


def plan_kernels(
    requested: str,
    *,
    embedded: bool,
    flags: Iterable[str],
    block_size: int | None = None,
) -> KernelPlan:
    """The dtype for `requested` ("auto" or a dtype) and the kernels it will run on.

    "auto" for the embedded model is bfloat16 where vLLM runs its "vec" kernels (measured
    right, and twice as fast as float32), and float32 on CPUs with AMX, whose bfloat16
    kernels answer wrong; float32 runs the same kernels there as everywhere else.
    For any other model "auto" stays vLLM's choice (the model's own dtype).
    """
    found = frozenset(flags)
    if requested != "auto":
        dtype, reason = requested, "as asked (--dtype)"
    elif not embedded:
        dtype, reason = "auto", "the model's own dtype (vLLM's choice)"
    elif has_amx(found):
        dtype = "float32"
        reason = (
            "this CPU has AMX, and the embedded model answers wrong on vLLM's AMX bfloat16 "
            "kernels; float32 runs the kernels checked right on every x86-64 CPU"
        )
    else:
        dtype = "bfloat16"
        reason = "no AMX: bfloat16 runs vLLM's vec kernels, checked right and ~2x float32's speed"
    shown = "bfloat16" if dtype == "auto" else dtype
    return KernelPlan(
        dtype=dtype,
        attention=attention_kernel(shown, found, block_size),
        gemm=gemm_kernel(shown, found),
        reason=reason,
    )


def find_preload_libraries(prefix: str = sys.prefix) -> list[Path]:
    """tcmalloc (Debian's libtcmalloc-minimal4) and Intel's OpenMP runtime (the intel-openmp
    wheel, in `<prefix>/lib`), those found; vLLM's CPU backend asks for both."""
    found: list[Path] = []
    for directory in _TCMALLOC_DIRS:
        candidate = Path(directory) / TCMALLOC
        if candidate.is_file():
            found.append(candidate)
            break
    iomp = Path(prefix) / "lib" / IOMP
    if iomp.is_file():
        found.append(iomp)
    return found


def preload_value(libraries: Iterable[Path], current: str | None) -> str | None:
    """LD_PRELOAD with `libraries` in front of `current`; None if there is nothing to add."""
    present = (current or "").replace(":", " ").split()
    added = [str(lib) for lib in libraries if str(lib) not in present]
    if not added:
        return None
    return " ".join([*added, *present])


def cpu_summary(flags: Iterable[str]) -> str:
    """One line naming the kernel-deciding flags this CPU has and lacks."""
    found = set(flags)
    parts = [f"{flag}={'yes' if flag in found else 'no'}" for flag in KERNEL_FLAGS]
    return f"{os.cpu_count() or '?'} cores, " + " ".join(parts)
