"""vLLM's own scores: `vllm.LLM(runner="pooling").score`, in a process of its own.

`python -m tests.rerank.vllm_reference OUT` reads one JSON object on stdin: `model` (a
directory), `dtype`, `max_model_len` and `cases`, a list of `[data_1, data_2]` (a text or
a list of texts each: 1:N or N:N), and writes to the file OUT (vLLM logs on stdout) the
scores of each case. It is the reference the real-engine tests hold the server's scores to;
it runs before the tests' server starts, so that one engine at a time holds the memory, its
engine core in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), as the LoRA reference.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def scores(spec: dict[str, Any]) -> list[list[float]]:
    """Each case's scores under vLLM's offline `LLM.score`."""
    from vllm import LLM

    llm = LLM(
        model=spec["model"],
        runner="pooling",
        dtype=spec["dtype"],
        max_model_len=spec["max_model_len"],
        enforce_eager=True,
    )
    return [
        [output.outputs.score for output in llm.score(first, second, use_tqdm=False)]
        for first, second in spec["cases"]
    ]


def main() -> None:
    spec = json.load(sys.stdin)
    # The server's own CPU environment (engine/vllm/args.configure_cpu): every core computes.
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    Path(sys.argv[1]).write_text(json.dumps(scores(spec)), encoding="utf-8")


if __name__ == "__main__":
    main()
