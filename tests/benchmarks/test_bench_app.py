"""The harness against this project's own app, with the fake engine behind a real uvicorn."""

from __future__ import annotations

import pytest

from benchmarks.client import ApiConfig
from benchmarks.loops import LoadSpec
from benchmarks.runner import HttpTarget, RunSettings, run_http
from benchmarks.workloads import Workload, WorkloadConfig
from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.models.entries import first_chat, model_entries
from oai_server.settings import Settings
from tests.live import serve

OUTPUT_LEN = 12


@pytest.mark.parametrize("api", ["completions", "chat"])
async def test_closed_loop_against_the_app(api: str) -> None:
    engine = FakeEngine(token_delay=0.002)
    with serve(create_app(Settings(), engine)) as root:
        url = f"{root}/v1"
        target = HttpTarget(
            ApiConfig(base_url=url, model=first_chat(model_entries(Settings())).name, api=api)
        )
        workload = Workload(WorkloadConfig(input_len=10, output_len=OUTPUT_LEN), api)
        settings = RunSettings(label="app", num_requests=8, warmup=1, progress=False)
        record = await run_http(target, workload, LoadSpec(concurrency=4), settings)
    metrics = record["metrics"]
    assert metrics["completed"] == 8
    assert metrics["errors"] == {}
    assert metrics["output_tokens"] == 8 * OUTPUT_LEN
    assert metrics["output_len_mismatches"] == 0
    assert metrics["input_tokens"] > 0  # from the server's usage
    assert 0 < metrics["ttft_ms"]["p50"] < metrics["e2el_ms"]["p50"]
    assert len(engine.calls) == 9  # the warm-up request, then the measured ones
    assert all(call.options.ignore_eos for call in engine.calls)
