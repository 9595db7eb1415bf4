"""SIGTERM with streams in flight: they finish (or are cut with an error event) and exit 0."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from tests.conformance import async_validating_client
from tests.production.conftest import chat_body
from tests.production.processes import fake_server, until_draining

STREAMS = 10
# The drain's own wait aside, what stopping may take on a loaded 2-core machine (the
# aborted streams' last events, then uvicorn's and the app's shutdown): generous, since a
# server that ignored the drain timeout would take the streams' full 30 s.
STOP_MARGIN_S = 15
CHAT = "/v1/chat/completions"


async def _stream(http: httpx.AsyncClient, started: asyncio.Event, tokens: int) -> list[str]:
    """The stream's data lines, after signalling that its first chunk arrived."""
    body = chat_body(stream=True, max_tokens=tokens, ignore_eos=True)
    events: list[str] = []
    async with http.stream("POST", CHAT, json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
                started.set()
    return events


async def _drain(tmp_path: Path, *, tokens: int, drain_timeout: float) -> dict[str, Any]:
    """Start `STREAMS` streams of `tokens` tokens (0.1 s each), SIGTERM, watch the drain."""
    with fake_server(tmp_path, token_delay=0.1, drain_timeout=drain_timeout) as server:
        async with async_validating_client(base_url=server.root, timeout=60) as http:
            events = [asyncio.Event() for _ in range(STREAMS)]
            streams = [asyncio.create_task(_stream(http, e, tokens)) for e in events]
            for e in events:
                await asyncio.wait_for(e.wait(), 10)
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            async with async_validating_client(base_url=server.root) as fresh:
                health = await until_draining(fresh)
                refused = await fresh.post(CHAT, json=chat_body())
            results = await asyncio.gather(*streams)
            finished = time.monotonic() - signalled
        code = await asyncio.to_thread(server.proc.wait, 30)
        exited = time.monotonic() - signalled
        log = server.log.read_text()
    return {
        "health": health,
        "refused": refused,
        "results": results,
        "finished_s": finished,
        "exit_code": code,
        "exit_s": exited,
        "log": log,
    }


async def test_sigterm_lets_streams_in_flight_finish(tmp_path: Path) -> None:
    out = await _drain(tmp_path, tokens=20, drain_timeout=30)
    assert out["health"].status_code == 503
    assert out["refused"].status_code == 503
    assert out["refused"].json()["error"]["code"] == "server_shutting_down"
    assert out["refused"].headers["retry-after"]
    for events in out["results"]:
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        assert not any("error" in c for c in chunks)
    assert out["exit_code"] == 0, out["log"][-3000:]
    print(
        f"drain: {STREAMS} streams in flight, {len(out['results'])} completed, "
        f"streams done {out['finished_s']:.2f} s and exit {out['exit_s']:.2f} s after SIGTERM"
    )
    assert out["exit_s"] < 2 + STOP_MARGIN_S  # the streams' 2 s, then the exit


async def test_sigterm_aborts_what_outlasts_the_drain_timeout(tmp_path: Path) -> None:
    out = await _drain(tmp_path, tokens=300, drain_timeout=1)
    assert out["health"].status_code == 503
    for events in out["results"]:
        assert events[-1] == "[DONE]"
        error = json.loads(events[-2])["error"]
        assert error["code"] == "server_shutting_down"
        assert sum("error" in json.loads(e) for e in events[:-1]) == 1
    assert out["exit_code"] == 0, out["log"][-3000:]
    print(
        f"drain timeout 1 s: {STREAMS} streams cut with an error event and [DONE] in "
        f"{out['finished_s']:.2f} s, exit 0 after {out['exit_s']:.2f} s"
    )
    assert out["exit_s"] < 1 + STOP_MARGIN_S
