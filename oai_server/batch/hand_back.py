"""The batch lines on the chat engine, and the room an interactive request makes among them.

Up to the idle cap's lines may run on an idle chat engine; an interactive request about to
reach it hands back those beyond the small cap first (`make_room`, the admission step's
hook): each is cancelled, aborted in the engine and put back in its batch's queue. Built
before the core (the admission step, and so the chat engine, is built with `make_room`);
the runner, built on the core's services, adds its lines here as it starts them.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from contextvars import ContextVar

# How long an interactive request waits, at most, for the lines it displaces to unwind
# (their aborts sent); they take an event-loop turn or two.
HAND_BACK_S = 0.1

# True in a line's task: what it submits to the chat engine is a batch line, not chat.
_ON_LINE: ContextVar[bool] = ContextVar("on_batch_line", default=False)


def mark_line() -> None:
    """Mark the current task (its own context) as a batch line's: `make_room` lets its
    requests pass."""
    _ON_LINE.set(True)


class BatchLines:
    """The lines of this replica's batches on the chat engine, oldest first, each with how
    to put it back in its batch's queue; `max_in_flight`, the small cap, is what stays
    beside interactive requests."""

    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self.running: dict[asyncio.Task[None], Callable[[], None]] = {}
        # Interactive requests in `make_room`, not yet counted by the engine as live.
        self.arriving = 0
        self.interactive_at = -math.inf  # when an interactive request was last seen

    def add(self, task: asyncio.Task[None], put_back: Callable[[], None]) -> None:
        self.running[task] = put_back

    def remove(self, task: asyncio.Task[None]) -> None:
        """`task` is off the engine (ended, or answered): never handed back now."""
        self.running.pop(task, None)

    def beyond_cap(self) -> bool:
        return len(self.running) > self.max_in_flight

    def hand_back(self) -> list[asyncio.Task[None]]:
        """Cancel the youngest lines beyond the small cap, each put back in its batch's
        queue: the tasks cancelled."""
        cancelled = []
        while len(self.running) > self.max_in_flight:
            task, put_back = self.running.popitem()
            if not task.done():  # one just finished is kept, not run twice
                task.cancel()
                put_back()
                cancelled.append(task)
        return cancelled

    async def make_room(self) -> None:
        """Called as an interactive request is about to reach the chat engine: hand back
        the lines beyond the small cap first, and wait (`HAND_BACK_S` at most) until
        their aborts are sent. The engine core reads its input in order, so it drops them
        before it schedules the request, whose prefill then shares its step with the
        small cap's lines only. Handed back once the request is seen in flight instead,
        the aborts came after it, and the first requests of a burst after a quiet spell
        waited on steps that carried every line of the idle cap."""
        # The count first: it ends the call on every request while no batch runs.
        if len(self.running) <= self.max_in_flight or _ON_LINE.get():
            return
        self.arriving += 1  # the small cap while the lines unwind, even if `idle_s` is 0
        try:
            cancelled = self.hand_back()
            if cancelled:
                await asyncio.wait(cancelled, timeout=HAND_BACK_S)
        finally:
            self.arriving -= 1
            self.interactive_at = time.monotonic()
