"""A batch cancelled mid-run keeps what finished; a batch whose server is killed mid-run is
finished by the next one, every `custom_id` exactly once (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import openai

from oai_server.batch.records import BatchRecords
from oai_server.engine.fake import FakeEngine
from oai_server.errors import EngineOverloadedError
from oai_server.store.sql import create_engine
from oai_server.store.url import async_url
from tests.batch.helpers import TERMINAL, chat_line, read_lines, start_fake_server, upload, wait
from tests.live import serve
from tests.store.conftest import make_app, sdk

# 0.7 s a line (7 tokens): a batch of 40 outlasts by far the second or so a cancel or an
# expiry takes to be seen (the runner looks once a second), even on a loaded machine.
SLOW = {"token_delay": 0.1}


def test_cancel_mid_run_keeps_what_finished_and_stops_the_rest(store_url: str) -> None:
    engine = FakeEngine(**SLOW)
    with (
        serve(
            make_app(store_url, engine, batch_max_in_flight=2, batch_max_in_flight_idle=2)
        ) as base,
        sdk(base) as client,
    ):
        file_id = upload(client, [chat_line(f"r{i}", f"q{i}") for i in range(40)])
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        deadline = time.monotonic() + 20
        while client.batches.retrieve(batch.id).request_counts.completed < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cancelling = client.batches.cancel(batch.id)
        assert cancelling.status == "cancelling"
        assert cancelling.cancelling_at is not None

        cancelled = wait(client, batch.id)
        assert cancelled.status == "cancelled"
        assert cancelled.cancelled_at is not None
        finished = cancelled.request_counts.completed
        assert 2 <= finished < 40
        kept = read_lines(client, cancelled.output_file_id)
        assert len(kept) == finished
        assert len({line["custom_id"] for line in kept}) == finished
        assert engine.aborted, "the lines in flight were aborted in the engine"
        assert client.batches.cancel(batch.id).status == "cancelled"


def test_a_server_killed_mid_batch_is_finished_by_the_next_exactly_once(store_url: str) -> None:
    total = 30
    process, base = start_fake_server(store_url)
    try:
        with sdk(base) as client:
            file_id = upload(client, [chat_line(f"r{i}", f"q{i}") for i in range(total)])
            batch = client.batches.create(
                input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            deadline = time.monotonic() + 20
            while client.batches.retrieve(batch.id).request_counts.completed < 3:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()

    finished = _finished_lines(store_url, batch.id)
    assert 3 <= finished < total
    engine = FakeEngine()
    app = make_app(store_url, engine, batch_lease_seconds=1.0)
    with serve(app) as base, sdk(base) as client:
        done = _wait_past_slow_reads(client, batch.id)
        assert done.status == "completed"
        assert (done.request_counts.completed, done.request_counts.failed) == (total, 0)
        ids = Counter(line["custom_id"] for line in read_lines(client, done.output_file_id))
        assert ids == Counter(f"r{i}" for i in range(total))
    # Only the lines the killed server had not finished ran again.
    assert len(engine.calls) == total - finished


def _wait_past_slow_reads(client: openai.OpenAI, batch_id: str) -> Any:
    """The finished batch, polled past a 503 `store_unavailable`: on a loaded machine a
    read past its 1.5 s deadline marks the store down for a moment, as it should."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(openai.InternalServerError):
            batch = client.batches.retrieve(batch_id)
            if batch.status in TERMINAL:
                return batch
        time.sleep(0.05)
    raise AssertionError("the batch never finished")


def _finished_lines(store_url: str, batch_id: str) -> int:
    """How many of the batch's lines the database holds as finished (no server running)."""

    async def count() -> int:
        records = BatchRecords(create_engine(async_url(store_url, Path())))
        try:
            return len(await records.lines(batch_id))
        finally:
            await records.engine.dispose()

    return asyncio.run(count())


def test_an_engine_not_serving_leaves_lines_to_run_later_not_failed(store_url: str) -> None:
    engine = FakeEngine(fail_at_step=0, fault=EngineOverloadedError("The engine is busy."))
    with serve(make_app(store_url, engine)) as base, sdk(base) as client:
        file_id = upload(client, [chat_line("a", "one"), chat_line("b", "two")])
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        wait(client, batch.id, until={"in_progress"})
        time.sleep(1.5)
        waiting = client.batches.retrieve(batch.id)
        assert waiting.status == "in_progress"
        assert (waiting.request_counts.completed, waiting.request_counts.failed) == (0, 0)
        engine.fail_at_step = None
        done = wait(client, batch.id)
        assert (done.status, done.request_counts.completed, done.error_file_id) == (
            "completed",
            2,
            None,
        )


def _close_window(store_url: str, batch_id: str) -> None:
    """Move the batch's window into the past, as 24 hours passing would."""

    async def close() -> None:
        records = BatchRecords(create_engine(async_url(store_url, Path())))
        body = await records.batch(batch_id, None)
        assert body is not None
        await records.set_batch(batch_id, {**body, "expires_at": body["created_at"]})
        await records.engine.dispose()

    asyncio.run(close())


def test_a_batch_past_its_window_expires_keeping_what_finished(store_url: str) -> None:
    engine = FakeEngine(**SLOW)
    with (
        serve(
            make_app(store_url, engine, batch_max_in_flight=1, batch_max_in_flight_idle=1)
        ) as base,
        sdk(base) as client,
    ):
        file_id = upload(client, [chat_line(f"r{i}", f"q{i}") for i in range(40)])
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        wait(client, batch.id, until={"in_progress"})
        _close_window(store_url, batch.id)
        expired = wait(client, batch.id)
        assert expired.status == "expired"
        assert expired.expired_at is not None
        finished = expired.request_counts.completed
        assert finished < 40
        assert expired.request_counts.failed == 40 - finished
        errors = read_lines(client, expired.error_file_id)
        assert {line["error"]["code"] for line in errors} == {"batch_expired"}
        assert all(line["response"] is None for line in errors)
