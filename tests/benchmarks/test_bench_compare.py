"""The pure parts of `compare`: ratios and their spread, command lines, log parsing, launcher."""

from __future__ import annotations

import importlib.metadata
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks.contenders import (
    OURS,
    VLLM,
    EngineSettings,
    contender,
    contender_env,
    parse_engine_log,
)
from benchmarks.ratios import Spread, paired_ratios, process_table, ratio_table
from benchmarks.vllm_launcher import patched_version


def _record(server: str, round_: int, concurrency: int, tok_s: float, ttft: float) -> Any:
    return {
        "label": f"{server}-r{round_}",
        "load": {"mode": "closed", "concurrency": concurrency},
        "server_info": {
            "server": server,
            "round": str(round_),
            "logged_dtype": "float32",
            "answers_right": "30/40",
        },
        "metrics": {"output_throughput": tok_s, "ttft_ms": {"p50": ttft}},
        "server_process": {"startup_s": 20.0 + round_, "rss_peak_mib": 1000.0 * round_},
    }


RECORDS = [
    _record(OURS, 1, 8, 90.0, 110.0),
    _record(VLLM, 1, 8, 100.0, 100.0),
    _record(OURS, 2, 8, 110.0, 100.0),
    _record(VLLM, 2, 8, 100.0, 100.0),
    _record(OURS, 1, 32, 300.0, 500.0),
    _record(VLLM, 1, 32, 200.0, 1000.0),
    _record(VLLM, 2, 32, 200.0, 1000.0),  # ours missing in round 2: no pair
]


def test_spread_of_ratios_is_geometric() -> None:
    spread = Spread.of([0.5, 2.0], geometric=True)
    assert spread is not None
    assert spread.mean == pytest.approx(1.0)
    assert (spread.low, spread.high, spread.n) == (0.5, 2.0, 2)
    assert spread.format() == "1.00 (0.50-2.00)"
    assert Spread.of([]) is None
    single = Spread.of([3.0])
    assert single is not None
    assert single.format(1) == "3.0"
    arithmetic = Spread.of([1.0, 2.0, 6.0])
    assert arithmetic is not None
    assert arithmetic.mean == pytest.approx(3.0)


def test_ratios_pair_servers_by_round_and_load_point() -> None:
    ratios = paired_ratios(RECORDS, "metrics.output_throughput")
    assert ratios["c8"] == pytest.approx([0.9, 1.1])
    assert ratios["c32"] == pytest.approx([1.5])
    assert list(ratios) == ["c8", "c32"]  # lightest load first
    assert paired_ratios(RECORDS, "metrics.no_such_metric") == {"c8": [], "c32": []}


def test_ratio_table_shows_mean_and_range() -> None:
    table = ratio_table(RECORDS)
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()}
    c8 = rows["c8"].split(" | ")
    expected_mean = math.sqrt(0.9 * 1.1)
    assert c8[1] == "2"
    assert c8[2] == f"{expected_mean:.2f} (0.90-1.10)"
    assert rows["c32"].split(" | ")[2] == "1.50"
    assert rows["c32"].split(" | ")[4] == "0.50"  # TTFT p50: half of vLLM's
    assert "| - |" in rows["c8"]  # metrics missing from the records


def test_process_table_summarises_rounds() -> None:
    table = process_table(RECORDS)
    ours_c8 = next(line for line in table.splitlines() if line.startswith("| ours | c8"))
    cells = ours_c8.split(" | ")
    assert cells[2] == "float32"
    assert cells[3] == "30/40"  # the start's answers, scored before any load
    assert "21.5 (21.0-22.0)" in cells  # start-up s over two rounds
    assert "1,500 (1,000-2,000)" in cells  # RSS peak MiB


def test_same_settings_give_both_servers_the_same_flags_and_environment() -> None:
    engine = EngineSettings(dtype="bfloat16", max_model_len=1024, kvcache_space_gib=3)
    base = {"PATH": "/bin", "VLLM_CPU_OMP_THREADS_BIND": "0"}
    model = Path("/models/m")
    ours = contender(OURS, model, "m", 8001, engine, ours_model_dir=model, base_env=base)
    vllm = contender(VLLM, model, "m", 8002, engine, ours_model_dir=model, base_env=base)
    flags = ["--dtype", "bfloat16", "--max-model-len", "1024", "--enforce-eager"]
    for server in (ours, vllm):
        joined = " ".join(server.command)
        assert " ".join(flags) in joined
        assert "--served-model-name m" in joined
        assert server.env["VLLM_CPU_KVCACHE_SPACE"] == "3"
        assert server.env["PATH"] == "/bin"
    assert ours.env == vllm.env
    assert ours.command[1:3] == ["-m", "oai_server"]
    assert not any(arg.startswith("--cpu-") for arg in ours.command)
    assert "--model /models/m" in " ".join(ours.command)
    assert vllm.command[1:5] == ["-m", "benchmarks.vllm_launcher", "serve", "/models/m"]


def test_threads_bind_settings() -> None:
    assert EngineSettings().env(cpus=4)["VLLM_CPU_OMP_THREADS_BIND"] == "0-3"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in EngineSettings(threads_bind="auto").env()
    assert EngineSettings(threads_bind="1").env()["VLLM_CPU_OMP_THREADS_BIND"] == "1"


def test_out_of_the_box_drops_engine_flags_and_cpu_environment() -> None:
    base = {"VLLM_CPU_KVCACHE_SPACE": "8", "VLLM_CPU_OMP_THREADS_BIND": "0-1", "HOME": "/h"}
    assert contender_env(base, None) == {"HOME": "/h"}
    model = Path("/models/m")
    ours = contender(OURS, model, "m", 1, None, ours_model_dir=None, base_env=base)
    vllm = contender(VLLM, model, "m", 2, None, ours_model_dir=None, base_env=base)
    assert "--model" not in ours.command
    for server in (ours, vllm):
        assert not {"--dtype", "--max-model-len", "--enforce-eager"} & set(server.command)
    tuned = contender(
        VLLM, model, "m", 2, None, ours_model_dir=None, extra_args=["--gpu-memory-utilization=0.3"]
    )
    assert tuned.command[-1] == "--gpu-memory-utilization=0.3"
    with pytest.raises(ValueError, match="unknown server"):
        contender("sglang", model, "m", 3, None, ours_model_dir=None)


def test_parse_engine_log() -> None:
    log = (
        "INFO 11-21 05:50:01 [core.py:134] Initializing a V1 LLM engine (v0.32.0) with config: "
        "model='/m', tokenizer='/m', dtype=torch.bfloat16, max_seq_len=8192, "
        "enforce_eager=False, kv_cache_dtype=auto, device_config=cpu\n"
        "INFO [kv_cache_utils.py:2328] CPU KV cache size: 93,184 tokens, Maximum concurrency\n"
        "WARNING something else: dtype=float16\n"
    )
    assert parse_engine_log(log) == {
        "dtype": "bfloat16",
        "max_model_len": "8192",
        "enforce_eager": "False",
        "kv_cache_tokens": "93184",
    }
    assert parse_engine_log("no engine here") == {}


def test_launcher_answers_vllm_version_from_vllm_cpu() -> None:
    installed = {"vllm-cpu": "0.32.0", "httpx": "0.28.1"}

    def version(name: str) -> str:
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]

    patched = patched_version(version)
    assert patched("vllm") == "0.32.0+cpu"  # "+cpu": how vLLM's platform detection finds CPUs
    assert patched("httpx") == "0.28.1"
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        patched("not-installed")
    installed["vllm"] = "0.33.0"  # the CUDA build: nothing to patch
    assert patched("vllm") == "0.33.0"
