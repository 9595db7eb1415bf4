"""Cancel work for a client that has gone away before its answer was ready.

A non-streamed request sends nothing until the engine is done, so a closed
connection would go unnoticed, and the engine would keep generating for nobody.
`Disconnect` watches the connection (the ASGI `http.disconnect` message) and cancels
the work it guards, which aborts its engine request. A stream is guarded the same way
until its first step is in (queued, in prefill), then by its response
(`oai_server.http.sse`) while it streams: one watcher for both.

One plain task watches, the work runs in the request's own task, and the cancellation
is asyncio's own, as `asyncio.timeout` does it: an anyio task group (a task per side)
cost more per request than the rest of the route together, and each anyio cancel scope
about as much as a watcher task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

T = TypeVar("T")


class Disconnect:
    """One request's connection, watched by one task from creation until `stop`."""

    def __init__(self, receive: Receive) -> None:
        self.gone = False
        self._task = asyncio.current_task()
        self._guarding = False
        self._cancelled = False
        loop = asyncio.get_running_loop()
        self._watcher: asyncio.Future[None] | None = loop.create_task(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone = True
        self._cancel()

    def _cancel(self) -> None:
        if self._guarding and self._task is not None:
            self._cancelled = True
            self._task.cancel()

    async def guard(self, work: Coroutine[Any, Any, T]) -> T:
        """Await `work`; raise `ClientDisconnect` (after cancelling it) if the client leaves."""
        if self.gone:
            # Gone between two guards (a stream's start and its response): the work starts
            # all the same, so that whatever it holds (its engine request) is released as
            # it is cancelled, at its first wait, or simply ends if it never waits.
            asyncio.get_running_loop().call_soon(self._cancel)
        self._guarding = True
        try:
            return await work
        except asyncio.CancelledError:
            # Ours alone (not also a shutdown's): the client left.
            if self._cancelled and self._task is not None and self._task.uncancel() == 0:
                self._cancelled = False
                raise ClientDisconnect() from None
            raise
        finally:
            self._guarding = False

    def stop(self) -> None:
        """Stop watching; call it once the request is answered, however it ended.

        The references to both tasks go first: the cancelled watcher keeps its error, whose
        traceback holds the watcher's frame and so this object, and a cycle through it
        would keep the whole request (its scope, its server objects) for the collector.
        """
        watcher, self._watcher, self._task = self._watcher, None, None
        if watcher is not None:
            watcher.cancel()


async def until_disconnect(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """Await `work`; raise `ClientDisconnect` (after cancelling it) if the client leaves."""
    watch = Disconnect(request.receive)
    try:
        return await watch.guard(work)
    finally:
        watch.stop()
