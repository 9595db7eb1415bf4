"""What the `batch` benchmark sends, as a client of the server: chat bodies, a stream's time
to its first token, and a batch created, polled and cancelled through the Batch API."""

from __future__ import annotations

import asyncio
import io
import json
import time
from typing import Any

import httpx

TERMINAL = {"completed", "failed", "cancelled", "expired"}


def chat_body(model: str, i: int, max_tokens: int, **extra: Any) -> dict[str, Any]:
    question = f"Question {i}: name a colour and say why you like it."
    return {
        "model": model,
        "messages": [{"role": "user", "content": question}],
        "max_tokens": max_tokens,
        "ignore_eos": True,  # every request the same length: ratios of like with like
        **extra,
    }


async def ttft(http: httpx.AsyncClient, body: dict[str, Any]) -> float:
    """Seconds from sending `body`, streamed, to its first content."""
    began = time.perf_counter()
    async with http.stream("POST", "/chat/completions", json={**body, "stream": True}) as r:
        r.raise_for_status()
        first: float | None = None
        async for line in r.aiter_lines():
            content = first is None and line.startswith("data: {") and '"content":"' in line
            if content and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                first = time.perf_counter() - began
    assert first is not None, "no content streamed"
    return first


async def start_batch(http: httpx.AsyncClient, model: str, lines: int, max_tokens: int) -> str:
    """A batch of `lines` chat lines, created: its id."""
    rows = [
        {
            "custom_id": f"line-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": chat_body(model, i, max_tokens),
        }
        for i in range(lines)
    ]
    content = "".join(json.dumps(row) + "\n" for row in rows).encode()
    files = {"file": ("input.jsonl", io.BytesIO(content))}
    uploaded = await http.post("/files", files=files, data={"purpose": "batch"})
    uploaded.raise_for_status()
    body = {
        "input_file_id": uploaded.json()["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    created = await http.post("/batches", json=body)
    created.raise_for_status()
    batch_id: str = created.json()["id"]
    return batch_id


async def batch(http: httpx.AsyncClient, batch_id: str) -> dict[str, Any]:
    answer = await http.get(f"/batches/{batch_id}")
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    return body


async def completed(http: httpx.AsyncClient, batch_id: str) -> int:
    """The batch's lines completed so far."""
    count: int = (await batch(http, batch_id))["request_counts"]["completed"]
    return count


async def finish(http: httpx.AsyncClient, batch_id: str) -> dict[str, Any]:
    # Polled, as a client of the Batch API does: there is nothing to wait on.
    while (body := await batch(http, batch_id))["status"] not in TERMINAL:  # noqa: ASYNC110
        await asyncio.sleep(0.2)
    return body


async def cancel(http: httpx.AsyncClient, batch_id: str) -> dict[str, Any]:
    (await http.post(f"/batches/{batch_id}/cancel")).raise_for_status()
    return await finish(http, batch_id)
