"""On the real engine, first come first served: a chat request that comes while batch lines
hold the idle engine starts before the line queued behind them (order, not time).

One sequence at a time (`--max-num-seqs 1`) and an idle cap of two lines: one line runs,
the next waits in the engine's queue. Without its hand-back, that queued line would run
before the chat request, which came after it.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, Server, run_server

pytestmark = pytest.mark.integration

LINES = 4
# A line runs to its end once started (one sequence, no preemption): a queued line run
# first would have ended before the chat request started, whatever its length.
LINE_TOKENS = 24
CHAT_TOKENS = 4
# The chat request waits for the running line to end: minutes on a loaded 2-core machine.
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    flags = (
        "--max-num-seqs", "1",
        "--batch-max-in-flight", "1",
        "--batch-max-in-flight-idle", "2",
        "--batch-idle-seconds", "0",
    )  # fmt: skip
    with run_server(tmp_path_factory.mktemp("hand_back"), *flags) as server:
        yield server


def _until(server: Server, gauge: str, count: int) -> None:
    deadline = time.monotonic() + 120
    while server.gauge(gauge) < count:
        assert time.monotonic() < deadline, f"{gauge} never reached {count}"
        time.sleep(0.02)


def _ran_to_the_end(server: Server) -> float:
    """The engine's requests that ended other than by an abort (vLLM's own count)."""
    text = httpx.get(f"{server.root}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(maxsplit=1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total{") and 'finished_reason="abort"' not in line
    )


def test_a_chat_request_starts_before_the_batch_line_queued_ahead_of_it(
    one_at_a_time: Server,
) -> None:
    http = httpx.Client(transport=ValidatingTransport(), timeout=TIMEOUT_S)
    with openai.OpenAI(
        base_url=one_at_a_time.base_url, api_key="unused", http_client=http, max_retries=0
    ) as client:
        rows = [
            {
                "custom_id": f"line-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": MODEL,
                    "messages": [{"role": "user", "content": f"Tell story number {i}."}],
                    "max_tokens": LINE_TOKENS,
                    "ignore_eos": True,
                },
            }
            for i in range(LINES)
        ]
        ended_before = _ran_to_the_end(one_at_a_time)
        data = "".join(json.dumps(row) + "\n" for row in rows).encode()
        file = client.files.create(file=("input.jsonl", io.BytesIO(data)), purpose="batch")
        batch = client.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        # One line running, the next queued in the engine behind it.
        _until(one_at_a_time, "vllm:num_requests_running", 1)
        _until(one_at_a_time, "vllm:num_requests_waiting", 1)
        chat = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Name a primary colour."}],
            max_tokens=CHAT_TOKENS,
        )
        assert chat.choices[0].message.content
        # One sequence at a time: had the queued line gone first, it would have ended
        # before the chat request even started.
        ended = client.batches.retrieve(batch.id).request_counts
        assert ended is not None
        assert ended.completed <= 1, "a queued line ran before the chat"
        deadline = time.monotonic() + TIMEOUT_S
        while (batch := client.batches.retrieve(batch.id)).status != "completed":
            assert batch.status in ("validating", "in_progress", "finalizing"), batch.status
            assert time.monotonic() < deadline, "the batch never ended"
            time.sleep(0.5)
        assert batch.output_file_id is not None
        output = client.files.content(batch.output_file_id).text.splitlines()
        ids = sorted(json.loads(line)["custom_id"] for line in output)
        assert ids == [f"line-{i}" for i in range(LINES)]
        # Each line ran to its end once (the handed-back one again, after its abort): a
        # line run twice would still leave one output line.
        assert _ran_to_the_end(one_at_a_time) - ended_before == LINES + 1
