"""When the batch runner starts another line: the idle engine's capacity while only batch
lines run, a few lines at most beside interactive requests, none while anything is queued."""

from __future__ import annotations

from typing import Any, cast

from oai_server.batch.runner import BatchRunner


class Engine:
    """The two counts the runner reads from the chat engine."""

    def __init__(self) -> None:
        self.queued = 0
        self.interactive = 0


def runner(engine: Engine, *, cap: int = 2, idle_cap: int = 8) -> BatchRunner:
    unused = cast(Any, None)

    def live() -> int:
        return engine.interactive + batch.in_flight

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
        max_in_flight=cap,
        max_in_flight_idle=idle_cap,
        lease_s=30,
        priority=False,
    )
    return batch


def admitted(batch: BatchRunner) -> int:
    """Start lines while there is room; how many run then."""
    while not batch._full():
        batch.in_flight += 1
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
    batch.in_flight = 2  # six lines finished: still the small cap while the chat runs
    assert batch._full()
    batch.in_flight = 1
    assert not batch._full()
    engine.interactive = 0  # the chat is done: the idle cap again
    assert admitted(batch) == 8


def test_nothing_starts_while_a_request_is_queued() -> None:
    engine = Engine()
    batch = runner(engine)
    engine.queued = 1
    assert admitted(batch) == 0
