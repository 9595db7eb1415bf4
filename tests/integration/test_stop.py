"""Stopping the real server with real vLLM requests in flight.

SIGTERM drains: what finishes within `--drain-timeout` finishes, what outlasts it ends
with an error event and `[DONE]` (a 503 when not streamed), the process exits 0 and no
engine process is left. SIGINT (Ctrl-C) skips the drain.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.conformance import async_validating_client
from tests.integration.conftest import MODEL, Server, run_server
from tests.production.processes import until_draining

pytestmark = pytest.mark.integration

DRAIN_TIMEOUT_S = 15  # the short requests took up to 5.7 s on a loaded 2-core machine: 2.6x that
SHORT = {"max_tokens": 12, "ignore_eos": True}  # a second or two: ends within the drain
LONG = {"max_tokens": 1500, "ignore_eos": True}  # a minute or more: outlasts the drain
# After the drain: the aborted answers go out, then vLLM's engine shuts down.
EXIT_AFTER_DRAIN_S = 30
METRICS = (
    "oai_engine_waiting_requests ",
    "oai_time_to_first_token_seconds_count{model=",
    "oai_request_queue_time_seconds_count{model=",
    "vllm:num_requests_waiting{",
    "vllm:kv_cache_usage_perc{",
    "vllm:prefix_cache_hits_total{",
    "vllm:time_to_first_token_seconds_count{",
)


def _body(sampling: dict[str, Any], *, stream: bool) -> dict[str, Any]:
    return {"model": MODEL, "prompt": "Count to a thousand:", "stream": stream, **sampling}


async def _stream(
    http: httpx.AsyncClient, body: dict[str, Any], started: asyncio.Event
) -> list[Any]:
    """The stream's events (parsed, `[DONE]` as the string), signalling its first one."""
    events: list[Any] = []
    async with http.stream("POST", "/v1/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append("[DONE]" if line == "data: [DONE]" else json.loads(line[6:]))
                started.set()
    return events


async def _until_running(server: Server, count: int) -> None:
    """Until the engine works on `count` requests (a minute at most)."""
    deadline = time.monotonic() + 60
    while await asyncio.to_thread(server.running_requests) < count:
        assert time.monotonic() < deadline, "the requests never reached the engine"
        await asyncio.sleep(0.05)


def _engine_processes(server: Server) -> list[psutil.Process]:
    children = psutil.Process(server.proc.pid).children(recursive=True)
    assert children, "the real engine runs in a process of its own"
    return children


async def test_sigterm_drains_real_requests_in_flight(tmp_path: Path) -> None:
    flags = ("--drain-timeout", str(DRAIN_TIMEOUT_S))
    with run_server(tmp_path, *flags) as server:
        engine = _engine_processes(server)
        async with async_validating_client(base_url=server.root, timeout=120) as http:
            whole_short = asyncio.create_task(
                http.post("/v1/completions", json=_body(SHORT, stream=False))
            )
            whole_long = asyncio.create_task(
                http.post("/v1/completions", json=_body(LONG, stream=False))
            )
            started = [asyncio.Event(), asyncio.Event()]
            short = asyncio.create_task(_stream(http, _body(SHORT, stream=True), started[0]))
            long = asyncio.create_task(_stream(http, _body(LONG, stream=True), started[1]))
            for event in started:
                await asyncio.wait_for(event.wait(), 60)
            await _until_running(server, 2)
            # vLLM's own metrics, in-process, beside ours: dashboards for `vllm serve` work.
            metrics = (await http.get("/metrics")).text
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            async with async_validating_client(base_url=server.root, timeout=10) as fresh:
                health = await until_draining(fresh)
            finished = await asyncio.gather(whole_short, short)
            finished_s = time.monotonic() - signalled
            cut = await asyncio.gather(whole_long, long)
            cut_s = time.monotonic() - signalled
        code = await asyncio.to_thread(server.proc.wait, EXIT_AFTER_DRAIN_S)
        exit_s = time.monotonic() - signalled
        log = server.log.read_text()[-4000:]
        _, left = await asyncio.to_thread(psutil.wait_procs, engine, 10)
    print(
        f"real engine, SIGTERM with 4 requests in flight: the short ones done after "
        f"{finished_s:.2f} s, the long ones cut after {cut_s:.2f} s "
        f"(--drain-timeout {DRAIN_TIMEOUT_S}), exit {code} after {exit_s:.2f} s"
    )
    for name in METRICS:
        assert name in metrics, name
    # The port is open while the model loads, and says so (a load balancer waits).
    assert set(server.loading) == {200, 503}, server.loading
    assert health.status_code == 503
    whole, streamed = finished
    assert whole.status_code == 200
    assert whole.json()["choices"][0]["finish_reason"] == "length"
    assert streamed[-1] == "[DONE]"
    assert streamed[-2]["choices"][0]["finish_reason"] == "length"
    assert not any("error" in e for e in streamed[:-1])
    whole, streamed = cut
    assert whole.status_code == 503
    assert whole.json()["error"]["code"] == "server_shutting_down"
    assert streamed[-1] == "[DONE]"
    errors = [e["error"] for e in streamed[:-1] if "error" in e]
    assert [e["code"] for e in errors] == ["server_shutting_down"]
    assert DRAIN_TIMEOUT_S - 0.5 < cut_s < DRAIN_TIMEOUT_S + 10
    assert code == 0, log
    assert not left, f"engine processes outlived the server: {left}"


async def test_sigint_skips_the_drain(tmp_path: Path) -> None:
    # A drain would let the stream run to its end: a minute or more, within the timeout.
    with run_server(tmp_path, "--drain-timeout", "300", exit_code=None) as server:
        engine = _engine_processes(server)
        async with async_validating_client(base_url=server.root, timeout=120) as http:
            started = asyncio.Event()
            stream = asyncio.create_task(_stream(http, _body(LONG, stream=True), started))
            await asyncio.wait_for(started.wait(), 60)
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGINT)
            # Cut: the connection closes mid-stream (uvicorn's own grace is 5 s).
            cut = (await asyncio.gather(asyncio.wait_for(stream, 60), return_exceptions=True))[0]
            cut_s = time.monotonic() - signalled
        await asyncio.to_thread(server.proc.wait, 60)
        exit_s = time.monotonic() - signalled
        _, left = await asyncio.to_thread(psutil.wait_procs, engine, 10)
    print(
        f"real engine, SIGINT with a stream in flight: the stream cut after {cut_s:.2f} s, "
        f"exit after {exit_s:.2f} s"
    )
    assert isinstance(cut, httpx.TransportError) or "[DONE]" not in cut, cut
    assert cut_s < 30
    assert not left, f"engine processes outlived the server: {left}"
