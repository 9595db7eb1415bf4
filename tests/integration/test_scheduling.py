"""`--scheduling-policy priority` and `--stream-interval` on the real engine.

One server with both, and one sequence at a time (`--max-num-seqs 1`), so the order in
which waiting requests run is the scheduler's, plain to see.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conformance import async_validating_client, validating_client
from tests.integration.conftest import MODEL, Server, run_server

pytestmark = pytest.mark.integration

STREAM_INTERVAL = 4
TOKENS = 13  # the first token alone, then three chunks of four


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    flags = ("--scheduling-policy", "priority", "--stream-interval", str(STREAM_INTERVAL))
    root = tmp_path_factory.mktemp("scheduled")
    # Its own store (the Batch API's): no other server's batch runner may take its batches.
    data = ("--data-dir", str(root / "data"))
    with run_server(root, *flags, *data, "--max-num-seqs", "1") as server:
        yield server


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": "List the colours:", "temperature": 0, **fields}


async def _until_waiting(server: Server, count: int, gauge: str) -> None:
    """Until `gauge` counts `count` waiting requests (a minute at most)."""
    deadline = time.monotonic() + 60
    while await asyncio.to_thread(server.gauge, gauge) < count:
        assert time.monotonic() < deadline, f"the requests never queued ({gauge})"
        await asyncio.sleep(0.05)


async def _batch_of_one(http: httpx.AsyncClient, body: dict[str, Any]) -> str:
    """A batch of one chat line, created through the Batch API; its id."""
    line = {"custom_id": "line", "method": "POST", "url": "/v1/chat/completions", "body": body}
    files = {"file": ("input.jsonl", json.dumps(line).encode() + b"\n")}
    uploaded = await http.post("/v1/files", files=files, data={"purpose": "batch"})
    assert uploaded.status_code == 200, uploaded.text
    batch = {
        "input_file_id": uploaded.json()["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    created = await http.post("/v1/batches", json=batch)
    assert created.status_code == 200, created.text
    return str(created.json()["id"])


async def test_the_tiers_run_in_order_priority_default_flex_then_batch_lines(
    scheduled: Server,
) -> None:
    # Each tier is an engine priority; queued in the reverse order of their priorities,
    # each must still run in its place: under first-come-first-served the order reverses.
    finished: list[str] = []
    answer = {"max_tokens": 16, "ignore_eos": True}  # long enough that an overtaking shows

    async def complete(http: httpx.AsyncClient, tier: str) -> None:
        response = await http.post("/v1/completions", json=_body(**answer, service_tier=tier))
        assert response.status_code == 200, response.text
        finished.append(tier)

    async def batch_done(http: httpx.AsyncClient, batch_id: str) -> None:
        # A batch has no event to wait on: it is polled, as a client polls it.
        status = "validating"
        while status in ("validating", "in_progress", "finalizing"):
            await asyncio.sleep(0.02)
            status = (await http.get(f"/v1/batches/{batch_id}")).json()["status"]
        assert status == "completed"
        finished.append("batch")

    async with async_validating_client(base_url=scheduled.root, timeout=120) as http:
        # The one running sequence: the others wait behind it until it is cut.
        body = _body(max_tokens=1500, ignore_eos=True, stream=True)
        async with http.stream("POST", "/v1/completions", json=body) as blocker:
            assert blocker.status_code == 200
            lines = blocker.aiter_lines()
            await anext(lines)
            chat = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], **answer}
            batch = asyncio.create_task(batch_done(http, await _batch_of_one(http, chat)))
            # vLLM's own gauge counts a request once it is in the engine core's queue,
            # where the scheduler chooses between them.
            await _until_waiting(scheduled, 1, "vllm:num_requests_waiting")
            queued = [batch]
            for waiting, tier in enumerate(("flex", "default", "priority"), start=2):
                queued.append(asyncio.create_task(complete(http, tier)))
                await _until_waiting(scheduled, waiting, "vllm:num_requests_waiting")
        await asyncio.wait_for(asyncio.gather(*queued), 120)
    assert finished == ["priority", "default", "flex", "batch"]


def _content_chunks(http: httpx.Client, server: Server) -> tuple[list[str], str]:
    """The text of each streamed chunk, and the whole answer of the same request."""
    body = _body(max_tokens=TOKENS, ignore_eos=True)
    chunks: list[str] = []
    with http.stream("POST", f"{server.base_url}/completions", json={**body, "stream": True}) as s:
        for line in s.iter_lines():
            if line.startswith("data: {"):
                text = json.loads(line[6:])["choices"][0]["text"]
                if text:
                    chunks.append(text)
    whole = http.post(f"{server.base_url}/completions", json=body).json()
    assert whole["usage"]["completion_tokens"] == TOKENS
    return chunks, whole["choices"][0]["text"]


def test_stream_interval_sends_fewer_chunks_of_the_same_text(
    scheduled: Server, server: Server
) -> None:
    with validating_client(timeout=60) as http:
        coarse, coarse_text = _content_chunks(http, scheduled)
        fine, fine_text = _content_chunks(http, server)
    # The first token goes out alone, then one chunk per STREAM_INTERVAL tokens (vLLM may
    # merge more when the server reads slower than the engine writes, never fewer).
    assert len(coarse) <= 1 + -(-(TOKENS - 1) // STREAM_INTERVAL)
    assert "".join(coarse) == coarse_text
    assert "".join(fine) == fine_text
    assert len(fine) > len(coarse)


def test_priority_is_refused_without_priority_scheduling(server: Server) -> None:
    with validating_client(timeout=60) as http:
        refused = http.post(f"{server.base_url}/completions", json=_body(max_tokens=4, priority=1))
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "priority"
