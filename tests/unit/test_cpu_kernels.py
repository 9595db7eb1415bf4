"""The dtype and kernels chosen per CPU, the engine's preload, and the "ready" lines."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from oai_server.engine.vllm import cpu
from oai_server.startup import configure_logging, ready_message

# The flags of the two kinds of machine the project runs on.
AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"})
NO_AMX = frozenset({"avx2", "avx512f", "avx512_bf16"})
AVX2_ONLY = frozenset({"avx2"})


def test_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: fpu avx512f amx_bf16 amx_tile\n\n"
        "processor\t: 1\nflags\t\t: fpu\n",
        encoding="utf-8",
    )

    assert cpu.cpu_flags(cpuinfo) == {"fpu", "avx512f", "amx_bf16", "amx_tile"}
    assert cpu.cpu_flags(tmp_path / "missing") == frozenset()


@pytest.mark.parametrize(
    ("flags", "dtype", "gemm"),
    [
        (AMX, "float32", "oneDNN"),
        (NO_AMX, "bfloat16", "oneDNN AVX512_CORE_BF16"),
        (AVX2_ONLY, "float32", "oneDNN"),
    ],
    ids=["amx", "avx512-bf16", "avx2"],
)
def test_embedded_model_never_runs_on_the_amx_or_emulated_bfloat16_kernels(
    flags: frozenset[str], dtype: str, gemm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    plan = cpu.plan_kernels("auto", embedded=True, flags=flags)

    assert (plan.dtype, plan.attention, plan.gemm) == (dtype, "vec", gemm)


def test_a_capped_onednn_keeps_the_embedded_model_in_float32(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")

    assert cpu.plan_kernels("auto", embedded=True, flags=NO_AMX).dtype == "float32"


def test_an_explicit_dtype_wins_and_the_plan_names_the_amx_kernels() -> None:
    plan = cpu.plan_kernels("bfloat16", embedded=True, flags=AMX)

    assert plan.dtype == "bfloat16"
    assert plan.attention == "amx"
    assert "SGLang AMX" in plan.gemm
    assert "as asked" in plan.reason


def test_other_models_keep_their_own_dtype() -> None:
    assert cpu.plan_kernels("auto", embedded=False, flags=AMX).dtype == "auto"


def test_preload_puts_the_libraries_in_front_once(tmp_path: Path) -> None:
    tcmalloc, iomp = tmp_path / cpu.TCMALLOC, tmp_path / cpu.IOMP

    assert cpu.preload_value([tcmalloc, iomp], None) == f"{tcmalloc} {iomp}"
    assert cpu.preload_value([tcmalloc], "/x/libfoo.so") == f"{tcmalloc} /x/libfoo.so"
    assert cpu.preload_value([tcmalloc], str(tcmalloc)) is None
    assert cpu.preload_value([], None) is None


def test_iomp_is_found_in_the_environment_prefix(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / cpu.IOMP).write_bytes(b"")

    assert tmp_path / "lib" / cpu.IOMP in cpu.find_preload_libraries(str(tmp_path))
    assert all(lib.name != cpu.IOMP for lib in cpu.find_preload_libraries(str(tmp_path / "no")))


def test_ready_lines_say_where_what_how_long_and_how_to_stop() -> None:
    lines = ready_message(host="0.0.0.0", port=9000, model="m", dtype="float32")

    assert lines[0].startswith("ready in ")
    assert "http://127.0.0.1:9000/v1, model m (float32)" in lines[0]
    assert lines[1] == "  chat: http://127.0.0.1:9000/"
    assert "curl http://127.0.0.1:9000/v1/chat/completions" in lines[2]
    assert '"model": "m"' in lines[2]
    assert "Ctrl-C to stop" in lines[3]


def test_ready_lines_name_no_chat_page_without_the_web_ui() -> None:
    lines = ready_message(host="::", port=9000, model="m", dtype=None, web_ui=False)

    assert not any("chat:" in line for line in lines)
    assert "Ctrl-C to stop" in lines[-1]


def test_info_level_silences_the_engine_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set, then deleted: monkeypatch restores the environment afterwards either way.
    for name in ("VLLM_LOGGING_LEVEL", "TORCH_CPP_LOG_LEVEL", "PYTHONWARNINGS"):
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")  # a user's own choice wins
    names = ("vllm", "transformers", "torch", "triton", "filelock", "urllib3", "alembic")
    levels = {name: logging.getLogger(name).level for name in names}
    try:
        configure_logging("info")

        assert os.environ["VLLM_LOGGING_LEVEL"] == "ERROR"
        assert os.environ["TRANSFORMERS_VERBOSITY"] == "info"
        assert logging.getLogger("vllm").level == logging.ERROR
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
