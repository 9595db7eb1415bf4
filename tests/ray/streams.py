"""Read a streamed chat completion through Serve's proxy, timing its chunks."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.ray.conftest import MODEL


def chat_body(max_tokens: int, *, stream: bool) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say something."}],
        "max_tokens": max_tokens,
        "stream": stream,
    }


def expected_text(tokens: int) -> str:
    """What the slow fake engine says in `tokens` tokens."""
    return " ".join(f"w{i}" for i in range(tokens))


@dataclass
class Stream:
    replica: str = ""
    first_chunk_s: float | None = None
    last_chunk_s: float | None = None  # the last chunk with content
    total_s: float = 0.0
    text: str = ""
    finish_reason: str | None = None
    done: bool = False
    chunks: int = 0
    pieces: list[str] = field(default_factory=list)


async def read_stream(client: httpx.AsyncClient, url: str, max_tokens: int, out: Stream) -> None:
    """Stream one chat completion into `out` (filled as it goes, so a failure leaves a trace)."""
    began = time.perf_counter()
    body = chat_body(max_tokens, stream=True)
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        out.replica = response.headers["x-replica"]
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            if out.first_chunk_s is None:
                out.first_chunk_s = time.perf_counter() - began
            if line == "data: [DONE]":
                out.done = True
                break
            out.chunks += 1
            for choice in json.loads(line[len("data: ") :])["choices"]:
                if content := choice["delta"].get("content"):
                    out.pieces.append(content)
                    out.last_chunk_s = time.perf_counter() - began
                out.finish_reason = choice["finish_reason"] or out.finish_reason
    out.text = "".join(out.pieces)
    out.total_s = time.perf_counter() - began


async def until_started(streams: list[Stream], timeout_s: float = 30) -> None:
    """Until every stream has its first chunk; fails after `timeout_s`, not the run's timeout."""
    deadline = time.monotonic() + timeout_s
    while any(s.first_chunk_s is None for s in streams):
        waiting = sum(s.first_chunk_s is None for s in streams)
        assert time.monotonic() < deadline, f"{waiting} streams without a first chunk"
        await asyncio.sleep(0.05)


RUNNING = re.compile(r"^oai_engine_running_requests (\S+)$", re.MULTILINE)


async def running_on(client: httpx.AsyncClient, url: str, replica: str) -> int:
    """`oai_engine_running_requests` from the given replica's own /metrics.

    The proxy picks the replica, and prefers the one with fewer requests in flight, so one
    request at a time would always reach the idle replica: ask in bursts, which spill over
    onto the busy one, until the wanted one answers.
    """
    for _ in range(50):
        burst = await asyncio.gather(*(client.get(f"{url}/metrics") for _ in range(8)))
        for response in burst:
            if response.headers["x-replica"] == replica:
                found = RUNNING.search(response.text)
                assert found is not None
                return int(float(found.group(1)))
    raise AssertionError(f"replica {replica} never answered /metrics")
