"""`floor` end to end at a small size, the raw app's stream, and server processes' failures."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.cli import main
from benchmarks.floor import pinned, pooled, split_costs
from benchmarks.server_process import ServerProcess, ServerStartError, free_port
from benchmarks.stub_server import sse_events

OUTPUT_LEN = 16


def test_floor_measures_the_cpu_time_of_each_app(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cpus = os.sched_getaffinity(0)
    status = main(
        [
            "floor",
            "--num-requests", "12",
            "--warmup", "2",
            "--concurrency", "4",
            "--input-len", "8",
            "--output-len", str(OUTPUT_LEN),
            "--short-len", "2",
            "--out", str(tmp_path),
            "--no-plots",
            "--no-progress",
        ]
    )  # fmt: skip
    assert status == 0
    # The servers had a CPU of their own while it ran; the caller gets every CPU back.
    assert os.sched_getaffinity(0) == cpus
    records = {
        record["label"]: record
        for record in (json.loads(p.read_text()) for p in tmp_path.glob("*.json"))
    }
    assert set(records) == {"ours", "raw"}
    for record in records.values():
        assert record["metrics"]["completed"] == 12
        assert record["metrics"]["output_tokens"] == 12 * OUTPUT_LEN
        process = record["server_process"]
        assert process["cpu_s"] > 0
        assert process["cpu_us_per_request"] == pytest.approx(1e6 * process["cpu_s"] / 12)
        assert process["cpu_us_per_token"] == pytest.approx(
            process["cpu_us_per_request"] / OUTPUT_LEN
        )
    table = capsys.readouterr().out
    assert "| ours | 12 |" in table
    assert "| raw | 12 |" in table
    assert list(tmp_path.glob("*-cpu.md"))


def test_pinned_gives_the_servers_a_cpu_of_their_own_until_the_block_ends() -> None:
    cpus = os.sched_getaffinity(0)
    with pinned(True) as server_cpus:
        mine = os.sched_getaffinity(0)
        if len(cpus) < 2 or shutil.which("taskset") is None:
            assert (server_cpus, mine) == ((), cpus)  # nothing to share out
        else:
            assert len(server_cpus) == 1
            assert not mine & set(server_cpus)
            assert mine | set(server_cpus) == cpus
    assert os.sched_getaffinity(0) == cpus
    with pinned(False) as server_cpus:
        assert (server_cpus, os.sched_getaffinity(0)) == ((), cpus)


def test_raw_events_have_the_shape_of_a_chat_stream() -> None:
    events = sse_events("chat", "m", 3, continuous=True, usage=True)
    assert len(events) == 3 + 4  # role, 3 tokens, finish, usage, [DONE]
    chunks = [json.loads(event[len(b"data: ") :]) for event in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["usage"]["completion_tokens"] for c in chunks] == [0, 1, 2, 3, 3, 3]
    assert chunks[4]["choices"][0]["finish_reason"] == "length"
    assert chunks[5]["choices"] == []
    assert events[-1] == b"data: [DONE]\n\n"
    completions = sse_events("completions", "m", 2, continuous=False, usage=False)
    assert len(completions) == 2 + 2  # 2 tokens, finish, [DONE]
    assert "usage" not in json.loads(completions[0][len(b"data: ") :])


def test_a_server_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import sys; print('no model here'); sys.exit(3)"]
    server = ServerProcess(command, port=free_port(), log_path=tmp_path / "server.log")
    with pytest.raises(ServerStartError, match=r"status 3[\s\S]*no model here"):
        server.start(timeout_s=30)
    server.stop()


def test_split_costs_separates_request_and_chunk_costs() -> None:
    def record(chunks: int, cpu_us_per_request: float) -> dict[str, Any]:
        return {
            "metrics": {"completed": 10, "output_tokens": 10 * chunks},
            "server_process": {"cpu_us_per_request": cpu_us_per_request},
        }

    # 500 us per request plus 5 us per chunk.
    fixed, per_chunk = split_costs(record(16, 500 + 16 * 5), record(256, 500 + 256 * 5))
    assert fixed == pytest.approx(500)
    assert per_chunk == pytest.approx(5)


def test_the_production_configuration_is_measured_in_turns_with_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "floor",
            "--apps", "ours-prod,raw",
            "--rounds", "2",
            "--num-requests", "6",
            "--warmup", "1",
            "--concurrency", "3",
            "--input-len", "8",
            "--output-len", "8",
            "--short-len", "2",
            "--out", str(tmp_path),
            "--no-plots",
            "--no-progress",
        ]
    )  # fmt: skip
    assert status == 0
    logs = sorted(p.name for p in tmp_path.glob("*-floor-logs/*.log"))
    assert logs == ["floor-ours-prod.log", "floor-raw.log"]
    table = capsys.readouterr().out
    # Every request of the last round answered: the key got through, no limit was hit.
    assert "| ours-prod | 6 |" in table
    assert "| raw | 6 |" in table


def test_rounds_pool_into_one_run() -> None:
    def record(completed: int, tokens: int, cpu_s: float) -> dict[str, Any]:
        return {
            "metrics": {"completed": completed, "output_tokens": tokens},
            "server_process": {"cpu_s": cpu_s},
        }

    both = pooled([record(10, 160, 0.010), record(30, 480, 0.050)])
    assert both["metrics"] == {"completed": 40, "output_tokens": 640}
    assert both["server_process"]["cpu_us_per_request"] == pytest.approx(1500)


def test_before_serves_our_apps_from_the_other_checkout_in_the_same_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "floor",
        "--apps", "ours,raw",
        "--num-requests", "4",
        "--warmup", "0",
        "--concurrency", "2",
        "--input-len", "8",
        "--output-len", "4",
        "--short-len", "2",
        "--no-plots",
        "--no-progress",
    ]  # fmt: skip
    project = Path(__file__).resolve().parents[2]
    status = main([*args, "--before", str(project), "--out", str(tmp_path / "same")])
    assert status == 0
    table = capsys.readouterr().out
    assert "| before-ours | 4 |" in table
    assert "| ours | 4 |" in table
    # A directory without the project is refused: Python would serve an installed copy.
    with pytest.raises(SystemExit, match="not a checkout of this project"):
        main([*args, "--before", str(tmp_path), "--out", str(tmp_path / "empty")])
