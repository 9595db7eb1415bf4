"""Work a request starts and that outlives it: each batch line and each background
response has a trace of its own, linked to the request that started it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from oai_server.engine.fake import FakeEngine
from tests.tracing.conftest import traced
from tests.tracing.receiver import ReceivedSpan, Receiver
from tests.unit.conftest import MODEL

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"


async def _until(client: httpx.AsyncClient, path: str, done: set[str]) -> dict[str, Any]:
    for _ in range(400):
        body: dict[str, Any] = (await client.get(path)).json()
        if body["status"] in done:
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} still {body['status']}")


def _creator(receiver: Receiver, path: str) -> ReceivedSpan:
    (span,) = [s for s in receiver.spans if s.kind == 2 and s.attributes.get("url.path") == path]
    return span


async def test_each_batch_line_has_a_trace_linked_to_the_batchs_creation(
    receiver: Receiver, tmp_path: Path
) -> None:
    lines = [
        {
            "custom_id": f"line-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": MODEL,
                "messages": [{"role": "user", "content": f"Hi {i}"}],
                "max_tokens": 3,
            },
        }
        for i in range(2)
    ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    async with traced(receiver, data_dir=tmp_path) as client:
        uploaded = await client.post(
            "/v1/files", files={"file": ("in.jsonl", content)}, data={"purpose": "batch"}
        )
        created = await client.post(
            "/v1/batches",
            json={
                "input_file_id": uploaded.json()["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            },
            headers={"traceparent": TRACEPARENT},
        )
        assert created.status_code == 200, created.text
        batch = await _until(client, f"/v1/batches/{created.json()['id']}", {"completed", "failed"})
        assert batch["status"] == "completed"
    receiver.wait_for(2, "batch line")
    creator = _creator(receiver, "/v1/batches")
    assert creator.trace_id == TRACE_ID
    assert creator.attributes["oai.batch.id"] == batch["id"]
    roots = receiver.named("batch line")
    assert sorted(r.attributes["oai.batch.custom_id"] for r in roots) == ["line-0", "line-1"]
    for root in roots:
        # A trace of its own, linked to the creating request's span.
        assert root.trace_id != TRACE_ID
        assert root.parent_span_id == ""
        assert root.links == [(TRACE_ID, creator.span_id)]
        assert root.attributes["oai.batch.id"] == batch["id"]
        (engine,) = [s for s in receiver.children(root) if s.name == "engine"]
        assert engine.attributes["gen_ai.usage.output_tokens"] == 3


async def test_a_background_response_has_a_trace_linked_to_its_request(
    receiver: Receiver, tmp_path: Path
) -> None:
    engine = FakeEngine(reply="one two three", token_delay=0.01)
    async with traced(receiver, engine, data_dir=tmp_path) as client:
        queued = await client.post(
            "/v1/responses",
            json={"model": MODEL, "input": "Count", "background": True},
            headers={"traceparent": TRACEPARENT},
        )
        assert queued.status_code == 200, queued.text
        response_id = queued.json()["id"]
        done = await _until(client, f"/v1/responses/{response_id}", {"completed", "failed"})
        assert done["status"] == "completed"
    receiver.wait_for(1, "background response")
    creator = _creator(receiver, "/v1/responses")
    assert creator.trace_id == TRACE_ID
    (root,) = receiver.named("background response")
    assert root.trace_id != TRACE_ID
    assert root.parent_span_id == ""
    assert root.links == [(TRACE_ID, creator.span_id)]
    assert root.attributes["gen_ai.response.id"] == response_id
    # The engine's span is the background run's, not the (finished) request's.
    (engine_span,) = receiver.named("engine")
    assert engine_span.parent_span_id == root.span_id
    assert engine_span.trace_id == root.trace_id
