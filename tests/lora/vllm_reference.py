"""vLLM's own answers for LoRA adapters: `vllm.LLM` with a `LoRARequest`, in a process of its own.

`python -m tests.lora.vllm_reference OUT` reads one JSON object on stdin: `model` (a
directory), `dtype`, `max_model_len`, `max_lora_rank`, `max_tokens`, `messages` and
`adapters` (name -> directory), and writes to the file OUT (vLLM logs on stdout)
`prompt_token_ids`, the messages under the model's chat template, and `answers`
{name: text}, each adapter's greedy answer to them, asked alone (a batch of one, as the
tests ask the server). It is the reference the real-engine tests hold the server's adapter
answers to; it runs in a subprocess because vLLM's engine is process-wide, before the tests'
server starts, so that one engine at a time holds this process tree's memory. Its engine
core and worker run in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`): the same answers
as with the two processes of their own that each import vLLM, in half the time (33 s
against 68 s here).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def answers(spec: dict[str, Any]) -> dict[str, Any]:
    """The prompt's token ids and each adapter's greedy answer under vLLM's offline `LLM`."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.lora.request import LoRARequest

    llm = LLM(
        model=spec["model"],
        dtype=spec["dtype"],
        max_model_len=spec["max_model_len"],
        enforce_eager=True,
        enable_lora=True,
        max_loras=1,
        max_lora_rank=spec["max_lora_rank"],
    )
    tokenizer = llm.get_tokenizer()
    # As vLLM renders a chat request: the template's text, then its tokens (the template
    # writes the special tokens itself).
    text = tokenizer.apply_chat_template(
        spec["messages"], add_generation_prompt=True, tokenize=False
    )
    prompt_token_ids = tokenizer.encode(text, add_special_tokens=False)
    params = SamplingParams(temperature=0.0, max_tokens=spec["max_tokens"])
    prompt = TokensPrompt(prompt_token_ids=prompt_token_ids)
    texts = {}
    for lora_id, (name, path) in enumerate(sorted(spec["adapters"].items()), start=1):
        (output,) = llm.generate(
            [prompt], params, lora_request=LoRARequest(name, lora_id, path), use_tqdm=False
        )
        texts[name] = output.outputs[0].text
    return {"prompt_token_ids": prompt_token_ids, "answers": texts}


def main() -> None:
    spec = json.load(sys.stdin)
    # The server's own CPU environment (engine/vllm/args.configure_cpu): every core computes.
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    Path(sys.argv[1]).write_text(json.dumps(answers(spec)), encoding="utf-8")


if __name__ == "__main__":
    main()
