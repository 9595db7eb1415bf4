"""vLLM's CPU LoRA ops, replaced by oai_server/engine/vllm/lora_ops.py: a token without an
adapter (slot -1) gets no delta, even batched with tokens of the adapter in the last slot,
and the adapter's tokens get what vLLM's own op gives them (to float rounding: the
replacement multiplies in another order)."""

from __future__ import annotations

import pytest
import torch

from oai_server.engine.vllm import lora_ops as vllm_lora_ops


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
    torch.testing.assert_close(after[1:], before[1:])
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


@pytest.mark.parametrize(
    ("every_slot_at_once", "dtype"),
    [(True, torch.float32), (False, torch.float32), (True, torch.bfloat16)],
)
def test_tokens_of_several_adapters_each_get_their_own_slot(
    monkeypatch: pytest.MonkeyPatch, every_slot_at_once: bool, dtype: torch.dtype
) -> None:
    """A decode batch of the base model and three adapters: each adapter token gets vLLM's
    own op's delta, written in the output's slice; in float32 with the products taken all
    at once and slot by slot (a batch too large for all at once), in bfloat16 through
    vLLM's own op on masked inputs."""
    if not every_slot_at_once:
        monkeypatch.setattr(vllm_lora_ops, "ALL_SLOTS_MAX", 0)
    from vllm.lora.ops import torch_ops
    from vllm.lora.ops.torch_ops import lora_ops
    from vllm.lora.punica_wrapper import punica_cpu

    for module in (lora_ops, torch_ops, punica_cpu):
        for name in ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice"):
            monkeypatch.setattr(module, name, getattr(module, name))

    torch.manual_seed(1)
    hidden, rank, slots, out = 64, 8, 3, 24
    x = torch.randn(8, hidden, dtype=dtype)
    lora_a = torch.randn(slots, 1, rank, hidden, dtype=dtype)
    lora_b = torch.randn(slots, 1, out, rank, dtype=dtype)
    slot_of = torch.tensor([-1, 0, 1, 2, -1, 2, 1, 0])

    def delta() -> torch.Tensor:
        buffer = torch.zeros(8, rank)
        lora_ops.bgmv_shrink(x, lora_a, buffer, slot_of, 0.5)
        y = torch.ones(8, 2 * out, dtype=dtype)
        lora_ops.bgmv_expand_slice(buffer, lora_b, y, slot_of, out, out, True)
        return y

    before = delta()
    assert vllm_lora_ops.apply()
    after = delta()
    adapter = slot_of >= 0
    torch.testing.assert_close(after[adapter], before[adapter])
    assert torch.equal(after[~adapter], torch.ones(2, 2 * out, dtype=dtype))
