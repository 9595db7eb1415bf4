"""A real LoRA adapter for the embedded model, written by the tests: nothing is downloaded.

PEFT's layout, as vLLM reads it: `adapter_config.json` and `adapter_model.safetensors`
with `base_model.model.model.layers.{i}.self_attn.{q,v}_proj.lora_{A,B}.weight`. The
weights are fixed random numbers (a seed per adapter), large enough to change what the
model answers: PEFT starts B at zero, which would change nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

# SmolLM2-135M: hidden size 576, 30 layers, 3 key/value heads of 64 (v_proj's 192 outputs).
HIDDEN = 576
LAYERS = 30
OUTPUTS = {"q_proj": 576, "v_proj": 192}


def write_adapter(
    directory: Path,
    *,
    seed: int,
    rank: int = 8,
    hidden: int = HIDDEN,
    scale: float = 0.05,
    base_model: str = "HuggingFaceTB/SmolLM2-135M-Instruct",
) -> Path:
    """An adapter of `rank` on every layer's q and v projections, in `directory`.

    A `hidden` other than the model's makes one for another base model (wrong shapes);
    `base_model` is what its config names (vLLM's filesystem resolver wants the engine's model)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(LAYERS):
        for module, outputs in OUTPUTS.items():
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            a = rng.normal(0.0, scale, (rank, hidden)).astype(np.float32)
            b = rng.normal(0.0, scale, (outputs, rank)).astype(np.float32)
            tensors[f"{prefix}.lora_A.weight"] = a
            tensors[f"{prefix}.lora_B.weight"] = b
    save_file(tensors, str(directory / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted(OUTPUTS),
        "base_model_name_or_path": base_model,
    }
    (directory / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory
