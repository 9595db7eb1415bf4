"""When the batch runner starts another line: the idle engine's capacity while only batch
lines run, a few lines at most beside interactive requests (those beyond them handed back
when one arrives), none while anything is queued."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, cast

from oai_server.batch.hand_back import BatchLines
from oai_server.batch.runner import BatchRunner
from oai_server.engine.fake import FakeEngine
from tests.batch.helpers import chat_line, read_lines, runs_to_the_end, upload, wait
from tests.live import serve
from tests.store.conftest import ask, make_app, sdk


class Engine:
    """The two counts the runner reads from the chat engine."""

    def __init__(self) -> None:
        self.queued = 0
        self.interactive = 0


def runner(engine: Engine, *, cap: int = 2, idle_cap: int = 8, idle_s: float = 0) -> BatchRunner:
    unused = cast(Any, None)

    def live() -> int:
        return engine.interactive + batch.on_chat_engine

    async def healthy() -> None:
        return None

    batch = BatchRunner(
        unused,
        {},
        unused,
        shape=unused,
        waiting=lambda: engine.queued,
        live=live,
        health=healthy,
        breaker=unused,
        lines=BatchLines(cap),
        max_in_flight_idle=idle_cap,
        idle_s=idle_s,
        lease_s=30,
        priority=False,
    )
    return batch


def admitted(batch: BatchRunner) -> int:
    """Start lines while there is room; how many run then."""
    while not batch._full():
        batch.in_flight += 1
        batch.on_chat_engine += 1
    return batch.in_flight


def test_an_idle_engine_takes_lines_up_to_the_idle_cap() -> None:
    assert admitted(runner(Engine())) == 8


def test_beside_interactive_requests_only_the_small_cap_runs() -> None:
    engine = Engine()
    batch = runner(engine)
    engine.interactive = 1
    assert admitted(batch) == 2


def test_lines_already_running_when_chat_arrives_are_not_joined_by_more() -> None:
    engine = Engine()
    batch = runner(engine)
    assert admitted(batch) == 8
    engine.interactive = 1
    assert batch._full()
    batch.in_flight = batch.on_chat_engine = 2  # six lines ended: the small cap still
    assert batch._full()
    batch.in_flight = batch.on_chat_engine = 1
    assert not batch._full()
    engine.interactive = 0  # the chat is done: the idle cap again
    assert admitted(batch) == 8


def test_a_chat_pausing_between_requests_keeps_the_small_cap_until_idle_long_enough() -> None:
    engine = Engine()
    batch = runner(engine, idle_s=0.2)
    assert admitted(batch) == 8  # no chat seen yet: the engine is idle
    batch.in_flight = batch.on_chat_engine = 0
    engine.interactive = 1
    assert admitted(batch) == 2
    engine.interactive = 0  # the chat pauses: the lines do not take the engine back yet
    assert admitted(batch) == 2
    time.sleep(0.25)
    assert admitted(batch) == 8


def test_lines_on_the_embedding_engine_do_not_hide_a_chat_request() -> None:
    engine = Engine()
    batch = runner(engine)
    batch.in_flight = 5  # an embeddings batch's lines: not on the chat engine
    assert not batch._full()
    engine.interactive = 1
    assert batch._full(), "a chat request beside embedding lines got the idle cap"


def test_nothing_starts_while_a_request_is_queued() -> None:
    engine = Engine()
    batch = runner(engine)
    engine.queued = 1
    assert admitted(batch) == 0


async def test_beside_interactive_requests_the_youngest_lines_beyond_the_cap_are_handed_back() -> (
    None
):
    engine = Engine()
    batch = runner(engine, cap=2, idle_cap=5)
    handed_back: list[int] = []
    tasks = []
    for position in range(5):
        task = asyncio.create_task(asyncio.sleep(60))
        batch.chat_lines.add(task, functools.partial(handed_back.append, position))
        tasks.append(task)
    batch.in_flight = batch.on_chat_engine = 5
    batch._yield()
    assert handed_back == []  # only lines: the idle engine keeps them all
    engine.interactive = 1
    batch._yield()
    assert handed_back == [4, 3, 2]  # the youngest, which have done the least
    await asyncio.sleep(0)
    assert [task.cancelled() for task in tasks] == [False, False, True, True, True]
    assert list(batch.chat_lines.running) == tasks[:2]
    for task in tasks[:2]:
        task.cancel()


def test_a_chat_request_makes_the_lines_beyond_the_cap_yield_and_each_still_runs_once(
    store_url: str,
) -> None:
    engine = FakeEngine(token_delay=0.05)
    app = make_app(store_url, engine, batch_max_in_flight=2, batch_max_in_flight_idle=8)
    with serve(app) as base, sdk(base) as client:
        lines = [chat_line(f"r{i}", f"q{i}", max_tokens=20) for i in range(12)]
        batch = client.batches.create(
            input_file_id=upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        deadline = time.monotonic() + 20
        while engine.running_requests() < 8:  # the idle engine's capacity, taken
            assert time.monotonic() < deadline, "the idle cap's lines never ran"
            time.sleep(0.01)
        ask(client, "an interactive question", max_tokens=4)
        assert len(engine.aborted) == 6, "the lines beyond the small cap were not handed back"
        done = wait(client, batch.id)
        assert (done.status, done.request_counts.completed) == ("completed", 12)
        output = read_lines(client, done.output_file_id)
        assert [line["custom_id"] for line in output] == [f"r{i}" for i in range(12)]
    assert runs_to_the_end(engine) == sorted(f"q{i}" for i in range(12))
    assert len(engine.calls) == 12 + 6 + 1  # each handed-back line started again, once
