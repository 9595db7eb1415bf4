"""What vLLM's CPU backend will run on this CPU, and the choices made for it before it starts.

vLLM picks its CPU kernels from the CPU's features, with no switch of its own:

- attention (`vllm/v1/attention/backends/cpu_attn.py::_get_attn_isa`): "amx" when
  `torch.cpu._is_amx_tile_supported()` and the dtype is bfloat16 (block sizes are multiples
  of 32: the CPU backend refuses others); else "vec" (AVX-512 or AVX2). "vec16" is only for
  head sizes that are not a multiple of 32 (SmolLM2's is 64).
- matrix products (`vllm/model_executor/layers/utils.py::dispatch_cpu_unquantized_gemm`):
  with AMX tiles and bfloat16, weights of 1 MiB or less (SmolLM2's o_proj) go to SGLang's
  AMX kernel (`check_cpu_sgl_kernel`), the rest to oneDNN, which picks its own ISA (AMX,
  AVX512_CORE_BF16, AVX512_CORE, AVX2); otherwise oneDNN. `ONEDNN_MAX_CPU_ISA` caps oneDNN
  alone; on an AMX CPU it also stops oneDNN from asking the kernel for the AMX tile state,
  so the attention and SGLang AMX kernels then die with SIGILL.

So bfloat16 runs one set of kernels on CPUs with AVX-512 BF16 and no AMX (oneDNN's
AVX512_CORE_BF16 and the "vec" attention), another on CPUs with AMX, and an emulation slower
than float32 on CPUs with neither; float32 runs the same kernels on every x86-64 CPU (vLLM has
no AMX path for float32, and oneDNN keeps float32 exact by default). The embedded model (135M
parameters dequantized from 4 bits) scored the same in bfloat16 and float32 on every kernel
path reachable without AMX (`python -m benchmarks quality`), but bfloat16 on the AMX kernels
derailed on a plain question. So the embedded model computes in bfloat16 where the
AVX512_CORE_BF16 path is the one vLLM takes (1.3x `vllm serve`'s output tokens/s out of the
box, see the README), and in float32 everywhere else: right answers on every CPU.
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


def attention_kernel(dtype: str, flags: Iterable[str]) -> str:
    """The attention ISA vLLM picks for a head size that is a multiple of 32."""
    return "amx" if has_amx(flags) and dtype == "bfloat16" else "vec"


def gemm_kernel(dtype: str, flags: Iterable[str]) -> str:
    """vLLM's matmul path and the ISA oneDNN will take (its own choice, or ONEDNN_MAX_CPU_ISA)."""
    found = set(flags)
    if dtype != "bfloat16":
        return "oneDNN"
    if has_amx(found):
        return "oneDNN AMX + SGLang AMX (small weights)"
    capped = os.environ.get("ONEDNN_MAX_CPU_ISA")
    if capped:
        return f"oneDNN {capped}"
    return "oneDNN AVX512_CORE_BF16" if "avx512_bf16" in found else "oneDNN (bf16 emulated)"


def plan_kernels(
    requested: str,
    *,
    embedded: bool,
    flags: Iterable[str],
) -> KernelPlan:
    """The dtype for `requested` ("auto" or a dtype) and the kernels it will run on.

    "auto" for the embedded model is bfloat16 on CPUs with AVX-512 BF16 and no AMX (the path
    whose answers were measured right, and the fastest), float32 on the others (AMX kernels
    answered wrong; emulated bfloat16 is slower than float32). For any other model "auto"
    stays vLLM's choice (the model's own dtype).
    """
    found = frozenset(flags)
    if requested != "auto":
        dtype, reason = requested, "as asked (--dtype)"
    elif not embedded:
        dtype, reason = "auto", "the model's own dtype (vLLM's choice)"
    else:
        dtype, reason = embedded_dtype(found)
    shown = "bfloat16" if dtype == "auto" else dtype
    return KernelPlan(
        dtype=dtype,
        attention=attention_kernel(shown, found),
        gemm=gemm_kernel(shown, found),
        reason=reason,
    )


def embedded_dtype(flags: frozenset[str]) -> tuple[str, str]:
    """The embedded model's dtype on a CPU with `flags`, and why."""
    if has_amx(flags):
        return "float32", "the embedded model on AMX: vLLM's AMX bfloat16 kernels answer it wrong"
    if os.environ.get("ONEDNN_MAX_CPU_ISA"):
        return (
            "float32",
            "ONEDNN_MAX_CPU_ISA caps oneDNN: bfloat16 answers vary with it",
        )
    if "avx512_bf16" in flags:
        return "bfloat16", "the embedded model on AVX-512 BF16 without AMX: right and fastest"
    return "float32", "the embedded model without AVX-512 BF16: bfloat16 would be emulated"


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
