"""Batch lines on `/v1/embeddings`: each body equals the live endpoint's answer."""

from __future__ import annotations

import asyncio
import io
import json
import time
from typing import Any

from tests.batch.helpers import TERMINAL, jsonl
from tests.conformance import validate
from tests.embeddings.conftest import CHAT, EMBEDDING, embedding_app, sdk


def _line(custom_id: str, **body: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings", "body": body}


async def test_embedding_lines_answer_as_the_live_endpoint(store_url: str) -> None:
    inputs = {"one": "the first text", "two": ["a list", "of texts"], "b64": "encoded"}
    async with embedding_app(store_url=store_url) as http:
        client = sdk(http)
        lines = [_line(key, model=EMBEDDING, input=text) for key, text in inputs.items()]
        lines[2]["body"]["encoding_format"] = "base64"
        uploaded = await client.files.create(
            file=("input.jsonl", io.BytesIO(jsonl(lines))), purpose="batch"
        )
        batch = await client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
        )
        deadline = time.monotonic() + 30
        while (batch := await client.batches.retrieve(batch.id)).status not in TERMINAL:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert batch.request_counts is not None
        assert (batch.status, batch.request_counts.completed) == ("completed", 3)
        assert batch.output_file_id is not None
        output = (await client.files.content(batch.output_file_id)).text.splitlines()
        for raw, line in zip(output, lines, strict=True):
            answered = json.loads(raw)
            assert answered["custom_id"] == line["custom_id"]
            assert answered["response"]["status_code"] == 200
            if line["custom_id"] != "b64":  # the spec types `embedding` as an array only
                validate("CreateEmbeddingResponse", answered["response"]["body"])
            live = await http.post("/v1/embeddings", json=line["body"])
            assert answered["response"]["body"] == live.json()


async def test_an_embedding_line_naming_the_chat_model_fails_the_batch(store_url: str) -> None:
    async with embedding_app(store_url=store_url) as http:
        client = sdk(http)
        lines = [_line("ok", model=EMBEDDING, input="x"), _line("chat", model=CHAT, input="x")]
        uploaded = await client.files.create(
            file=("input.jsonl", io.BytesIO(jsonl(lines))), purpose="batch"
        )
        batch = await client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
        )
        deadline = time.monotonic() + 30
        while (batch := await client.batches.retrieve(batch.id)).status not in TERMINAL:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert batch.status == "failed"
        assert batch.errors is not None
        assert batch.errors.data is not None
        [error] = batch.errors.data
        assert (error.line, error.param) == (2, "model")
