"""400 requests at once against one server process: every one answered, memory bounded."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import psutil

from tests.conformance import async_validating_client
from tests.production.conftest import MODEL, chat_body
from tests.production.processes import fake_server

CONCURRENT = 400
TOKENS = 20


async def _one(http: httpx.AsyncClient, i: int) -> tuple[int, str, str]:
    """(status, x-request-id, how it ended) of request `i`, streamed when `i` is odd."""
    body = chat_body(max_tokens=TOKENS, ignore_eos=True, stream=bool(i % 2))
    headers = {"x-request-id": f"load-{i}"}
    if i % 2 == 0:
        response = await http.post("/v1/chat/completions", json=body, headers=headers)
        ending = response.json()["choices"][0]["finish_reason"] if response.is_success else ""
        return response.status_code, response.headers["x-request-id"], ending
    async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        data = [line[6:] async for line in r.aiter_lines() if line.startswith("data: ")]
    ending = json.loads(data[-2])["choices"][0]["finish_reason"] if data[-1] == "[DONE]" else ""
    return r.status_code, r.headers["x-request-id"], ending


async def test_400_concurrent_requests_all_answered(tmp_path: Path) -> None:
    with fake_server(tmp_path, token_delay=0.02) as server:
        process = psutil.Process(server.proc.pid)
        rss_before = process.memory_info().rss
        peak = rss_before
        limits = httpx.Limits(max_connections=CONCURRENT)
        async with async_validating_client(base_url=server.root, timeout=60, limits=limits) as http:
            began = time.monotonic()
            work = asyncio.gather(*(_one(http, i) for i in range(CONCURRENT)))
            task = asyncio.ensure_future(work)
            while not task.done():
                peak = max(peak, process.memory_info().rss)
                await asyncio.sleep(0.05)
            results = task.result()
            elapsed = time.monotonic() - began
            metrics = (await http.get("/metrics")).text
    statuses = {s: sum(1 for r in results if r[0] == s) for s in {r[0] for r in results}}
    print(
        f"overload: {CONCURRENT} concurrent ({CONCURRENT // 2} streamed), statuses {statuses}, "
        f"{elapsed:.2f} s, server RSS {rss_before / 2**20:.0f} MiB before, "
        f"peak {peak / 2**20:.0f} MiB"
    )
    assert statuses == {200: CONCURRENT}
    # Nothing lost or crossed: each answer is whole and carries its own request's id.
    assert sorted(r[1] for r in results) == sorted(f"load-{i}" for i in range(CONCURRENT))
    assert all(r[2] == "length" for r in results)
    assert f'oai_generation_tokens_total{{model="{MODEL}"}} {CONCURRENT * TOKENS}.0' in metrics
    assert peak - rss_before < 200 * 2**20
