"""Failures a batch meets while it runs: its input file gone before it was read (a failed
batch, not a stuck one), and the database refusing writes (the batch resumes once it takes
them again, every `custom_id` exactly once)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from oai_server.batch.records import BatchRecords, now_us
from oai_server.engine.fake import FakeEngine
from oai_server.ids import new_id
from oai_server.store.sql import create_engine
from oai_server.store.url import async_url
from schemas.batch import Batch
from tests.batch.helpers import chat_line, read_lines, upload, wait
from tests.live import serve
from tests.store.conftest import make_app, sdk


def _batch_on_a_gone_file(store_url: str) -> str:
    """A batch recorded as `POST /v1/batches` records it, whose input file was deleted
    before the runner read it: the id of that batch."""
    batch = Batch(
        id=new_id("batch"),
        endpoint="/v1/chat/completions",
        input_file_id="file-deleted",
        completion_window="24h",
        status="validating",
        created_at=int(time.time()),
        expires_at=int(time.time()) + 86_400,
        request_counts={"total": 0, "completed": 0, "failed": 0},
    )

    async def put() -> None:
        records = BatchRecords(create_engine(async_url(store_url, Path())))
        body = batch.model_dump(mode="json", exclude_none=True)
        await records.put_batch(batch.id, "", now_us(), body)
        await records.engine.dispose()

    asyncio.run(put())
    return batch.id


def test_a_batch_whose_input_file_is_gone_fails_saying_so(store_url: str) -> None:
    with serve(make_app(store_url)) as base, sdk(base) as client:
        batch_id = _batch_on_a_gone_file(store_url)
        failed = wait(client, batch_id)
    assert failed.status == "failed"
    assert failed.errors is not None
    assert [error.code for error in failed.errors.data] == ["file_not_found"]


class FlakyDatabase:
    """`BatchRecords.<call>` refused (as a full disk or a lost connection refuses it) the
    first `failures` times."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, call: str, failures: int) -> None:
        self.refused = 0
        real = getattr(BatchRecords, call)

        async def flaky(records: BatchRecords, *args: Any) -> Any:
            if self.refused < failures:
                self.refused += 1
                raise OperationalError("INSERT", {}, Exception("database or disk is full"))
            return await real(records, *args)

        monkeypatch.setattr(BatchRecords, call, flaky)


# A finished line's row, and the output files written with the final state.
@pytest.mark.parametrize("call", ["add_line", "finish"])
def test_database_errors_leave_the_batch_to_resume_each_line_once(
    store_url: str, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    database = FlakyDatabase(monkeypatch, call, failures=3)
    engine = FakeEngine(token_delay=0.01)
    total = 12
    with serve(make_app(store_url, engine)) as base, sdk(base) as client:
        file_id = upload(client, [chat_line(f"r{i}", f"q{i}") for i in range(total)])
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = wait(client, batch.id, timeout=60)
        output = read_lines(client, done.output_file_id)
    assert database.refused == 3
    assert done.status == "completed"
    assert (done.request_counts.completed, done.request_counts.failed) == (total, 0)
    assert Counter(line["custom_id"] for line in output) == Counter(f"r{i}" for i in range(total))
