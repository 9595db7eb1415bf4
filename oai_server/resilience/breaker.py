"""One circuit breaker shape for every dependency.

Closed (up): calls go through, each within its deadline. A call that times out opens the
breaker at once (each further one would cost its caller the whole deadline again); errors
open it after `errors_to_open` in a row (one failed command on a connection the server
closed while restarting is not an outage). Open (down): calls raise `DependencyDownError`
without touching the dependency, and one task probes it every `probe_every` seconds;
the first probe answered in time closes the breaker. There is no half-open state where
requests try their luck: only the probe waits on a dependency that may still hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

_GRACE_S = 0.02

# Tasks given up on by `within`, held until they finish unwinding (asyncio keeps only
# weak references to tasks).
_abandoned: set[asyncio.Future[Any]] = set()


class DependencyDownError(Exception):
    """Raised instead of calling a dependency its breaker marks down."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is marked down")
        self.name = name


def _abandon(task: asyncio.Future[Any]) -> None:
    task.cancel()
    _abandoned.add(task)
    # Retrieve the outcome so that a failure while unwinding is not logged as unhandled.
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    task.add_done_callback(_abandoned.discard)


async def abandoned_unwound(seconds: float) -> None:
    """Wait (at most `seconds`) until the calls `within` gave up on in this event loop have
    unwound: a client closed after that finds their connections checked in and closes them,
    rather than leaving them to the garbage collector."""
    loop = asyncio.get_running_loop()
    mine = [task for task in _abandoned if task.get_loop() is loop]
    if mine:
        await asyncio.wait(mine, timeout=seconds)


async def within(work: Awaitable[T], seconds: float) -> T:
    """The result of `work`, or `TimeoutError` after `seconds`.

    The caller never waits for the work to unwind: a database client cleaning up after a
    cancelled query (a rollback, a cancel request) waits on the same hung server, and
    `asyncio.timeout` around it was measured to overrun a 1 s deadline by 2 s.
    """
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait((task,), timeout=seconds)
        if not done:
            # The deadline and the answer may have come due together, while the loop was
            # busy or the process not scheduled: let an answer already there be read.
            done, _ = await asyncio.wait((task,), timeout=_GRACE_S)
    except asyncio.CancelledError:
        _abandon(task)
        raise
    if not done:
        _abandon(task)
        raise TimeoutError(f"no answer within {seconds:g} s")
    return task.result()


def _always(_exc: BaseException) -> bool:
    return True


class Breaker:
    """The breaker of dependency `name`; `probe()` asks it whether it answers again."""

    def __init__(
        self,
        name: str,
        probe: Callable[[], Awaitable[object]],
        *,
        errors_to_open: int = 3,
        probe_every: float = 0.5,
        probe_timeout: float = 1.0,
        is_failure: Callable[[BaseException], bool] = _always,
        timeout_errors: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.name = name
        self.up = True
        self.last_error: str | None = None
        self._probe = probe
        self._errors_to_open = errors_to_open
        self._probe_every = probe_every
        self._probe_timeout = probe_timeout
        self._is_failure = is_failure
        # The client's own timeouts (redis-py's socket timeout): timeouts like the deadline.
        self._timeout_errors: tuple[type[BaseException], ...] = (TimeoutError, *timeout_errors)
        self._errors = 0
        self._probing: asyncio.Task[None] | None = None
        self._back = asyncio.Event()
        self._back.set()
        self._down = asyncio.Event()

    @property
    def retry_after_s(self) -> float:
        """How soon a caller refused now may find the dependency back."""
        return self._probe_every + self._probe_timeout

    async def call(self, work: Awaitable[T], deadline_s: float) -> T:
        """`work` within `deadline_s` seconds; `DependencyDownError` at once while marked down."""
        if not self.up:
            if asyncio.iscoroutine(work):
                work.close()
            raise DependencyDownError(self.name)
        try:
            result = await within(work, deadline_s)
        except self._timeout_errors as exc:
            self.failed(exc, at_once=True)
            raise
        except Exception as exc:
            if self._is_failure(exc):
                self.failed(exc)
            raise
        self._errors = 0
        return result

    def failed(self, exc: BaseException, *, at_once: bool = False) -> None:
        """Count a failure (`call` counts its own); `at_once` marks the dependency down now."""
        self._errors += 1
        self.last_error = type(exc).__name__
        if self.up and (at_once or self._errors >= self._errors_to_open):
            self.up = False
            self._back.clear()
            self._down.set()
            logger.warning(
                "%s marked down after %r: not waited on, probed every %.1f s",
                self.name,
                exc,
                self._probe_every,
            )
            self._probing = asyncio.get_running_loop().create_task(self._probe_until_up())

    async def wait_up(self) -> None:
        """Return once the dependency is up (at once if it is)."""
        await self._back.wait()

    async def wait_down(self) -> None:
        """Return once the dependency is marked down (at once if it is)."""
        await self._down.wait()

    async def _probe_until_up(self) -> None:
        while True:
            await asyncio.sleep(self._probe_every)
            try:
                await within(self._probe(), self._probe_timeout)
            except Exception:  # noqa: BLE001 - still down: probe again later
                continue
            break
        self.up = True
        self._errors = 0
        self.last_error = None
        self._probing = None
        self._down.clear()
        self._back.set()
        logger.info("%s is back", self.name)

    async def close(self) -> None:
        """Stop probing (the server is stopping)."""
        if self._probing is not None:
            self._probing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probing
            self._probing = None
