"""`lora`: both servers get the same adapters and LoRA limits, each in its own spelling."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import lora
from benchmarks.contenders import OURS, VLLM


def _after(command: list[str], flag: str) -> list[str]:
    """The values given after each `flag` in `command` (up to the next flag)."""
    values: list[str] = []
    for i, word in enumerate(command):
        if word == flag:
            for value in command[i + 1 :]:
                if value.startswith("--"):
                    break
                values.append(value)
    return values


def test_both_servers_serve_the_same_adapters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_dir = tmp_path / "model"
    monkeypatch.setattr(lora, "_model_dir", lambda: model_dir)
    lora._write_adapters(tmp_path, cold=1, model_dir=model_dir)
    args = argparse.Namespace(out=tmp_path / "out")
    ours, vllm = (lora._server(name, tmp_path, args) for name in (OURS, VLLM))
    modules = {f"{name}={tmp_path / 'modules' / name}" for name in lora.ADAPTERS}
    assert set(_after(ours.command, "--lora-modules")) == modules
    # vLLM's flag keeps only its last occurrence: all four must follow one.
    assert ours.command.count("--lora-modules") == 4
    assert vllm.command.count("--lora-modules") == 1
    assert set(_after(vllm.command, "--lora-modules")) == modules
    for flag in ("--max-loras", "--max-lora-rank", "--max-cpu-loras", "--dtype"):
        assert _after(ours.command, flag) == _after(vllm.command, flag), flag
    # The adapters not loaded at start: a directory for each, read by name on first use.
    assert _after(ours.command, "--lora-dir") == [str(tmp_path / "dir")]
    assert vllm.env["VLLM_LORA_RESOLVER_CACHE_DIR"] == str(tmp_path / "dir")
    assert vllm.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    config = (tmp_path / "dir" / "cold0" / "adapter_config.json").read_text()
    # vLLM's filesystem resolver serves only adapters naming its engine's model.
    assert f'"base_model_name_or_path": "{model_dir}"' in config
