"""vLLM's CPU LoRA ops, fixed by oai_server/engine/vllm_lora_ops.py: a token without an
adapter (slot -1) gets no delta, even batched with tokens of the adapter in the last slot,
and the adapter's tokens get exactly what vLLM's own op gives them."""

from __future__ import annotations

import pytest
import torch

from oai_server.engine import vllm_lora_ops


def test_tokens_without_an_adapter_get_no_delta_from_the_last_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vllm.lora.ops import torch_ops
    from vllm.lora.ops.torch_ops import lora_ops
    from vllm.lora.punica_wrapper import punica_cpu

    # vLLM's own ops again after this test (apply() patches this process's modules).
    for module in (lora_ops, torch_ops, punica_cpu):
        for name in ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice"):
            monkeypatch.setattr(module, name, getattr(module, name))

    torch.manual_seed(0)
    hidden, rank, slots = 16, 4, 2
    x = torch.randn(3, hidden)
    lora_a = torch.randn(slots, 1, rank, hidden)
    lora_b = torch.randn(slots, 1, hidden, rank)
    # Token 0 on the base model, tokens 1-2 on the adapter of the last slot.
    seq_lens, slot_of = torch.tensor([1, 2]), torch.tensor([-1, slots - 1])
    starts = torch.tensor([0, 1])

    def delta() -> torch.Tensor:
        buffer = torch.zeros(3, rank)
        lora_ops.sgmv_shrink(x, lora_a, buffer, starts, seq_lens, slot_of, 2, 2, 3, 1.0)
        y = torch.zeros(3, hidden)
        lora_ops.sgmv_expand(buffer, lora_b, y, starts, seq_lens, slot_of, 2, 2, 3, True)
        return y

    assert vllm_lora_ops.patchable()
    before = delta()
    assert before[0].abs().sum() > 0  # vLLM's own op: the base token took the last slot's
    assert vllm_lora_ops.apply()
    after = delta()
    assert torch.equal(after[0], torch.zeros(hidden))
    assert torch.equal(after[1:], before[1:])
    assert vllm_lora_ops.apply()  # a second call changes nothing more
    assert torch.equal(delta(), after)


def test_ops_of_another_shape_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A vLLM whose ops differ is not patched: the engine falls back to the null adapter."""
    from vllm.lora.ops.torch_ops import lora_ops
    from vllm.lora.punica_wrapper import punica_cpu

    def bgmv_shrink(x: torch.Tensor, weights: torch.Tensor, out: torch.Tensor) -> None:
        raise AssertionError("never called")

    for module in (lora_ops, punica_cpu):
        monkeypatch.setattr(module, "bgmv_shrink", bgmv_shrink)
    assert not vllm_lora_ops.patchable()
    assert not vllm_lora_ops.apply()
    assert punica_cpu.bgmv_shrink is bgmv_shrink
