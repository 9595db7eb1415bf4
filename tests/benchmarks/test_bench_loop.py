"""Short runs of the harness against a stub OpenAI-like server on a real socket."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.cli import main
from benchmarks.client import ApiConfig, make_client, send_request
from benchmarks.loops import LoadSpec
from benchmarks.runner import HttpTarget, RunSettings, WarmupError, run_http
from benchmarks.stub_server import StubConfig, create_stub_app
from benchmarks.workloads import Workload, WorkloadConfig
from tests.conformance import AsyncValidatingTransport
from tests.live import serve

OUTPUT_LEN = 16


def target(url: str, api: str = "completions") -> HttpTarget:
    return HttpTarget(ApiConfig(base_url=url, model="stub", api=api), request_timeout_s=10)


def workload(api: str = "completions") -> Workload:
    return Workload(WorkloadConfig(input_len=20, output_len=OUTPUT_LEN), api)


def settings(**overrides: Any) -> RunSettings:
    values: dict[str, Any] = {"label": "stub", "num_requests": 8, "warmup": 2, "progress": False}
    return RunSettings(**{**values, **overrides})


@pytest.mark.parametrize("api", ["completions", "chat"])
async def test_closed_loop_run(stub_url: str, api: str) -> None:
    record = await run_http(
        target(stub_url, api), workload(api), LoadSpec(concurrency=4), settings()
    )
    metrics = record["metrics"]
    assert metrics["completed"] == 8
    assert metrics["failed"] == 0
    assert metrics["errors"] == {}
    assert metrics["cancelled"] == 0
    assert metrics["output_tokens"] == 8 * OUTPUT_LEN
    assert metrics["output_len_mismatches"] == 0
    assert metrics["input_tokens"] == 8 * 20  # the stub counts words
    assert len(record["samples"]["ttft_ms"]) == 8
    # The stub sends a role chunk at once and the first token 20 ms later: TTFT is the latter.
    assert 18 <= metrics["ttft_ms"]["p50"] < metrics["e2el_ms"]["p50"]
    assert metrics["tpot_ms"]["p50"] < metrics["ttft_ms"]["p50"]
    assert metrics["itl_ms"]["mean"] is not None
    assert metrics["request_throughput"] > 0
    assert record["load"] == {"mode": "closed", "concurrency": 4}
    assert record["base_url"] == stub_url
    assert record["api"] == api
    assert record["limits"] == {"num_requests": 8, "warmup": 2, "max_duration_s": 300.0}


@pytest.mark.parametrize("continuous", [True, False])
async def test_tokens_per_chunk_come_from_per_chunk_usage(stub_url: str, continuous: bool) -> None:
    api = ApiConfig(base_url=stub_url, model="stub", continuous_usage=continuous)
    spec = workload().requests(1)[0]
    # The harness's client sees what a real client sees: every response checked against the spec.
    async with make_client(stub_url, 1, 10, None, AsyncValidatingTransport()) as client:
        record = await send_request(client, api, spec)
    assert record.ok
    assert record.completion_tokens == OUTPUT_LEN  # the final usage chunk
    assert record.chunk_tokens == [2 if continuous else 1] * (OUTPUT_LEN // 2)
    assert record.send_time < record.chunk_times[0] <= record.chunk_times[-1] <= record.end_time


async def test_open_loop_run(stub_url: str) -> None:
    load = LoadSpec(rate=40.0, max_concurrency=4)
    record = await run_http(target(stub_url), workload(), load, settings())
    assert record["metrics"]["completed"] == 8
    assert record["load"] == {"mode": "open", "rate": 40.0, "max_concurrency": 4}


async def test_http_errors_are_counted_by_kind() -> None:
    with serve(create_stub_app(StubConfig(fail_every=3, token_delay=0.001))) as root:
        url = f"{root}/v1"
        load = LoadSpec(concurrency=3)
        record = await run_http(target(url), workload(), load, settings(num_requests=9, warmup=0))
    metrics = record["metrics"]
    assert metrics["errors"] == {"http_500": 3}
    assert metrics["completed"] == 6
    assert metrics["failed"] == 3
    assert len(record["samples"]["ttft_ms"]) == 6


async def test_a_run_stops_at_its_time_limit() -> None:
    # 16 tokens: 3.2 s per request, so a run that ignored its 0.4 s limit would take 9.6 s;
    # the bounds below leave a loaded machine seconds of room and still tell the two apart.
    slow = StubConfig(token_delay=0.2)
    with serve(create_stub_app(slow)) as root:
        url = f"{root}/v1"
        started = time.perf_counter()
        record = await run_http(
            target(url),
            workload(),
            LoadSpec(concurrency=2),
            settings(num_requests=6, warmup=0, max_duration_s=0.4),
        )
        elapsed = time.perf_counter() - started
    metrics = record["metrics"]
    assert elapsed < 5.0
    assert metrics["completed"] == 0
    assert metrics["cancelled"] == 2
    assert 0.4 <= metrics["duration_s"] < 4.0


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


async def test_an_unreachable_server() -> None:
    url = closed_port()
    with pytest.raises(WarmupError, match="connection"):
        await run_http(target(url), workload(), LoadSpec(concurrency=2), settings(num_requests=2))
    record = await run_http(
        target(url), workload(), LoadSpec(concurrency=2), settings(num_requests=3, warmup=0)
    )
    assert record["metrics"]["errors"] == {"connection": 3}


def test_command_line_run_sweep_and_report(
    stub_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--base-url", stub_url, "--num-requests", "4", "--warmup", "1", "--input-len", "16"]
    common += ["--output-len", "8", "--out", str(tmp_path), "--no-progress"]
    assert (
        main(["run", *common, "--concurrency", "2", "--label", "A", "--goodput", "ttft:1000"]) == 0
    )
    assert main(["sweep", *common, "--rate", "20,inf", "--server-info", "kind=stub"]) == 0
    out = capsys.readouterr().out
    assert "| A | c2 | 4 |" in out
    host = stub_url.split("/")[2]
    assert f"| {host} | r20 | 4 |" in out
    assert f"| {host} | rinf | 4 |" in out

    saved = sorted(tmp_path.glob("*.json"))
    assert len(saved) == 3
    records = [json.loads(path.read_text()) for path in saved]
    assert {r["label"] for r in records} == {"A", host}
    assert all(r["model"] == "stub" for r in records)  # found at GET /v1/models
    assert next(r for r in records if r["label"] == "A")["metrics"]["goodput"] > 0
    assert next(r for r in records if r["label"] == host)["server_info"] == {"kind": "stub"}
    assert len(list(tmp_path.glob("*.png"))) == 4
    assert len(list(tmp_path.glob("*.md"))) == 2

    assert main(["report", *map(str, saved), "--out", str(tmp_path), "--name", "all"]) == 0
    assert "| A | c2 |" in capsys.readouterr().out
    assert (tmp_path / "all.md").exists()
    assert (tmp_path / "all-latency.png").stat().st_size > 10_000
    assert (tmp_path / "all-ttft.png").stat().st_size > 10_000
