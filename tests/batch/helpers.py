"""Helpers of the Batch API's suite: input files, and a batch polled to its end."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import openai

from oai_server.engine.fake import FakeEngine, FakeTokenizer
from tests.store.conftest import MODEL

TERMINAL = {"completed", "failed", "cancelled", "expired"}


def chat_line(custom_id: str, text: str, **body: Any) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": MODEL, "messages": [{"role": "user", "content": text}], **body},
    }


def jsonl(lines: list[Any]) -> bytes:
    return "".join(
        (line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines
    ).encode()


def upload(client: openai.OpenAI, lines: list[Any]) -> str:
    return client.files.create(file=("input.jsonl", io.BytesIO(jsonl(lines))), purpose="batch").id


def wait(
    client: openai.OpenAI, batch_id: str, until: set[str] = TERMINAL, timeout: float = 30
) -> Any:
    """The batch, polled as a user would, once its status is in `until`."""
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in until:
            return batch
        assert time.monotonic() < deadline, f"batch still {batch.status}"
        time.sleep(0.05)


def read_lines(client: openai.OpenAI, file_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


def runs_to_the_end(engine: FakeEngine) -> list[str]:
    """The question (`q` and a number, as the tests write them) of every engine call that
    was not aborted, sorted: a line run to its end twice shows twice here, where its output
    line is written once whatever (a second write of a custom_id does nothing)."""
    questions = []
    for call in engine.calls:
        if call.request_id not in engine.aborted:
            found = re.search(r"\bq\d+\b", FakeTokenizer().decode(call.prompt_token_ids))
            if found:
                questions.append(found.group())
    return sorted(questions)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_fake_server(store_url: str) -> tuple[subprocess.Popen[bytes], str]:
    """`tests.batch.fake_server` in a process of its own (to be killed), once it serves."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.batch.fake_server", store_url, str(port)], env=env
    )
    base = f"http://127.0.0.1:{port}"
    # Generous, as tests/production/processes.py's: on a loaded machine a start took 30 s.
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/health").status_code == 200:
                return process, base
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise AssertionError("the server did not start")
        time.sleep(0.1)
