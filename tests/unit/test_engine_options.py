"""The vLLM adapter's engine settings, without starting an engine."""

from __future__ import annotations

import os

import pytest

from oai_server.engine.settings import EngineSettings
from oai_server.engine.vllm.args import configure_cpu as _configure_cpu
from oai_server.engine.vllm.args import engine_args as _engine_args

KV, BIND = "VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither variable set, and both put back as they were after the test: the code under
    test writes `os.environ` itself, which monkeypatch restores only for what it touched
    (`setenv` first, so that it records an unset variable too)."""
    for name in (KV, BIND):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_defaults_use_every_core() -> None:
    _configure_cpu(EngineSettings(model="m"))
    assert os.environ[KV] == "2"
    assert os.environ[BIND] == f"0-{(os.cpu_count() or 1) - 1}"


def test_environment_kept_when_no_setting_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KV, "6")
    monkeypatch.setenv(BIND, "1")
    _configure_cpu(EngineSettings(model="m"))
    assert (os.environ[KV], os.environ[BIND]) == ("6", "1")


def test_settings_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KV, "6")
    monkeypatch.setenv(BIND, "1")
    _configure_cpu(EngineSettings(model="m", cpu_kvcache_space=3, cpu_threads_bind="0"))
    assert (os.environ[KV], os.environ[BIND]) == ("3", "0")


def test_auto_leaves_binding_to_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BIND, "1")
    _configure_cpu(EngineSettings(model="m", cpu_threads_bind="auto"))
    assert BIND not in os.environ


def test_engine_args_pick_eager_on_cpu_only() -> None:
    options = EngineSettings(model="m", max_model_len=1024)
    cpu, gpu = _engine_args(options, on_cpu=True), _engine_args(options, on_cpu=False)
    assert cpu["enforce_eager"] is True
    assert gpu["enforce_eager"] is False
    assert "tensor_parallel_size" not in cpu
    assert gpu["tensor_parallel_size"] == 1
    assert cpu["max_model_len"] == 1024
    assert "max_num_seqs" not in cpu  # None means vLLM's default


def test_engine_args_name_the_served_model_not_the_weights() -> None:
    # vLLM labels its own metrics with this name; unset, they would show the weights' path.
    options = EngineSettings(model="/home/someone/.cache/weights")
    args = _engine_args(options, on_cpu=True, served_model_name="smollm2-135m-instruct")
    assert args["served_model_name"] == "smollm2-135m-instruct"
