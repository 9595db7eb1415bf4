"""The circuit breaker every dependency goes through: deadlines, opening, probing back."""

from __future__ import annotations

import asyncio
import time

import pytest

from oai_server.resilience import Breaker, DependencyDownError, within


class Dependency:
    """A dependency that answers, fails or hangs, as told; counts the calls it gets."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.calls = 0
        self.unwound = asyncio.Event()

    async def answer(self) -> str:
        self.calls += 1
        if self.mode == "error":
            raise ConnectionError("refused")
        if self.mode == "hang":
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                # A client cleaning up against a hung server: slow to unwind.
                await asyncio.shield(asyncio.sleep(1.0))
                self.unwound.set()
                raise
        return "answer"


def breaker_of(dep: Dependency, errors_to_open: int = 3) -> Breaker:
    return Breaker(
        "dep", dep.answer, probe_every=0.05, probe_timeout=0.05, errors_to_open=errors_to_open
    )


async def test_within_gives_up_at_its_deadline_without_waiting_for_the_unwinding() -> None:
    dep = Dependency()
    dep.mode = "hang"
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        await within(dep.answer(), 0.1)
    # The 1 s unwinding happens afterwards (the bound leaves a loaded machine 0.8 s).
    assert time.monotonic() - began < 0.9
    assert not dep.unwound.is_set()
    await asyncio.wait_for(dep.unwound.wait(), 5)


async def test_a_timeout_marks_the_dependency_down_at_once_and_a_probe_brings_it_back() -> None:
    dep = Dependency()
    breaker = breaker_of(dep)
    assert await breaker.call(dep.answer(), 0.1) == "answer"
    dep.mode = "hang"
    with pytest.raises(TimeoutError):
        await breaker.call(dep.answer(), 0.1)
    assert not breaker.up
    calls = dep.calls
    began = time.monotonic()
    with pytest.raises(DependencyDownError):
        await breaker.call(dep.answer(), 5.0)
    # At once, not after the call's 5 s deadline on the hung dependency (a bound of
    # milliseconds would be the machine's scheduling, not the breaker's).
    assert time.monotonic() - began < 1.0
    await asyncio.sleep(0.3)
    assert not breaker.up  # the probes time out too
    assert dep.calls > calls  # ... but only they reach the dependency
    dep.mode = "ok"
    async with asyncio.timeout(10):  # generous: it returns at the first good probe
        await breaker.wait_up()
    assert await breaker.call(dep.answer(), 0.1) == "answer"
    await breaker.close()


async def test_errors_mark_it_down_only_when_they_follow_each_other() -> None:
    dep = Dependency()
    breaker = breaker_of(dep, errors_to_open=3)
    for _ in range(2):
        dep.mode = "error"
        for _ in range(2):
            with pytest.raises(ConnectionError):
                await breaker.call(dep.answer(), 0.1)
        dep.mode = "ok"
        await breaker.call(dep.answer(), 0.1)  # a success in between: still up
        assert breaker.up
    dep.mode = "error"
    for _ in range(3):
        with pytest.raises(ConnectionError):
            await breaker.call(dep.answer(), 0.1)
    assert not breaker.up
    assert breaker.last_error == "ConnectionError"
    await breaker.close()


async def test_errors_of_the_request_are_not_failures_of_the_dependency() -> None:
    dep = Dependency()
    breaker = Breaker("dep", dep.answer, errors_to_open=1, is_failure=lambda e: False)

    async def bad_cursor() -> None:
        raise LookupError("no such cursor")

    with pytest.raises(LookupError):
        await breaker.call(bad_cursor(), 0.1)
    assert breaker.up


async def test_a_clients_own_timeout_marks_it_down_at_once() -> None:
    class ClientTimeoutError(Exception):
        """As redis-py raises when its socket timeout passes (not the builtin TimeoutError)."""

    async def times_out() -> None:
        raise ClientTimeoutError

    dep = Dependency()
    breaker = Breaker("dep", dep.answer, timeout_errors=(ClientTimeoutError,))
    with pytest.raises(ClientTimeoutError):
        await breaker.call(times_out(), 0.1)
    assert not breaker.up
    await breaker.close()
