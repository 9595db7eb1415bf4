"""Replicas on one PostgreSQL: a batch runs on one of them at a time, and another takes it
over when that one dies. A database call that hangs leaves the batch to resume, not stuck."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import threading
import time
from collections import Counter
from typing import Any

import httpx
import openai
import pytest

from benchmarks.fixtures.postgres import PostgresServer
from oai_server.batch import runner as batch_runner
from oai_server.batch.records import BatchRecords
from oai_server.engine.fake import FakeEngine
from tests.batch.helpers import TERMINAL, chat_line, read_lines, start_fake_server, upload, wait
from tests.live import serve
from tests.store.conftest import make_app, sdk


def _lines_answered(base: str) -> float:
    """This replica's `oai_batch_lines_total`, both results."""
    text = httpx.get(f"{base}/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("oai_batch_lines_total{")
    )


async def test_one_replica_runs_a_batch_and_another_takes_it_over_when_it_dies(
    postgres: PostgresServer,
) -> None:
    url = await postgres.create_database("batch_replicas")
    total = 40
    replicas: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for _ in range(2):
            process, base = start_fake_server(url)
            replicas[base] = process
        first = next(iter(replicas))
        with sdk(first) as client:
            file_id = upload(client, [chat_line(f"r{i}", f"q{i}") for i in range(total)])
            batch = client.batches.create(
                input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            deadline = time.monotonic() + 20
            while client.batches.retrieve(batch.id).request_counts.completed < 5:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        answered = {base: _lines_answered(base) for base in replicas}
        holder = max(answered, key=answered.__getitem__)
        survivor = next(base for base in replicas if base != holder)
        # Both runners poll for batches every second; only the lease holder answers lines.
        assert answered[holder] >= 5
        assert answered[survivor] == 0
        dead = replicas.pop(holder)
        dead.send_signal(signal.SIGKILL)
        dead.wait()

        with sdk(survivor) as client:
            done = wait(client, batch.id, timeout=60)
            assert (done.status, done.request_counts.completed) == ("completed", total)
            ids = Counter(line["custom_id"] for line in read_lines(client, done.output_file_id))
        assert ids == Counter(f"r{i}" for i in range(total))
        # It resumed where the dead replica stopped, not from the start.
        assert 0 < _lines_answered(survivor) <= total - answered[holder]
    finally:
        for process in replicas.values():
            process.send_signal(signal.SIGKILL)
            process.wait()


def _store_up(base: str) -> float:
    """`oai_dependency_up{dependency="store"}`, as /metrics says it now."""
    text = httpx.get(f"{base}/metrics").text
    prefix = 'oai_dependency_up{dependency="store"} '
    return next(
        float(line.removeprefix(prefix)) for line in text.splitlines() if line.startswith(prefix)
    )


def _wait_through_outage(
    client: openai.OpenAI, base: str, batch_id: str
) -> tuple[Any, list[float]]:
    """The finished batch, polled through the store's outage (a 503 while it is down), and
    the store's `oai_dependency_up` as a watcher thread read it meanwhile (its own loop, so
    a slow retrieve on a loaded machine cannot make it miss a short outage)."""
    seen: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(_store_up(base))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(openai.InternalServerError):
                batch = client.batches.retrieve(batch_id)
                if batch.status in TERMINAL:
                    return batch, seen
            time.sleep(0.05)
        raise AssertionError("the batch never finished")
    finally:
        done.set()
        watcher.join()


def test_a_database_write_that_hangs_leaves_the_batch_to_resume(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch_runner, "CALL_S", 0.3)
    add_line = BatchRecords.add_line
    hung: list[bool] = []

    async def hangs_once(self: BatchRecords, *args: Any) -> None:
        if not hung:
            hung.append(True)
            await asyncio.Event().wait()  # a database that never answers
        await add_line(self, *args)

    monkeypatch.setattr(BatchRecords, "add_line", hangs_once)
    app = make_app(
        store_url, FakeEngine(token_delay=0.01), batch_max_in_flight=1, batch_max_in_flight_idle=1
    )
    with serve(app) as base, sdk(base) as client:
        lines = [chat_line(f"r{i}", f"q{i}", max_tokens=2) for i in range(6)]
        batch = client.batches.create(
            input_file_id=upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        done, up = _wait_through_outage(client, base, batch.id)
        assert (done.status, done.request_counts.completed) == ("completed", 6)
        ids = Counter(line["custom_id"] for line in read_lines(client, done.output_file_id))
        assert ids == Counter(f"r{i}" for i in range(6))
        # The hang was seen as the database's: the store's breaker held it down (0), and
        # its probe brought it back (1).
        assert 0.0 in up
        assert up[up.index(0.0) :].count(1.0) > 0
        assert _store_up(base) == 1.0
    assert hung


@pytest.mark.parametrize("fault", ["hung", "killed"])
def test_a_database_hung_or_killed_mid_batch_stops_it_and_it_resumes(
    postgres: PostgresServer, fault: str
) -> None:
    url = asyncio.run(postgres.create_database(f"batch_outage_{fault}"))
    total = 40
    engine = FakeEngine(token_delay=0.02)  # 0.14 s a line, two at a time: ~3 s in all
    app = make_app(url, engine, batch_max_in_flight=2, batch_max_in_flight_idle=2)
    with serve(app) as base, sdk(base) as client:
        lines = [chat_line(f"r{i}", f"q{i}") for i in range(total)]
        batch = client.batches.create(
            input_file_id=upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        deadline = time.monotonic() + 20
        while client.batches.retrieve(batch.id).request_counts.completed < 5:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        postgres.freeze() if fault == "hung" else postgres.stop()
        try:
            # The lines in flight end (or hang on their write); then no line starts.
            time.sleep(1.0)
            stopped_at = len(engine.calls)
            time.sleep(2.0)
            assert len(engine.calls) == stopped_at
        finally:
            postgres.thaw() if fault == "hung" else postgres.start()
        assert stopped_at < total
        done, _ = _wait_through_outage(client, base, batch.id)
        assert (done.status, done.request_counts.completed) == ("completed", total)
        ids = Counter(line["custom_id"] for line in read_lines(client, done.output_file_id))
    assert ids == Counter(f"r{i}" for i in range(total))
