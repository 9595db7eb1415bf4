"""Cancel work for a client that has gone away before its answer was ready.

A non-streamed request sends nothing until the engine is done, so a closed
connection would go unnoticed, and the engine would keep generating for nobody.
`until_disconnect` runs the work in a cancel scope that a watcher cancels (which
aborts its engine request) when the ASGI `http.disconnect` message comes first.
A stream is watched the same way until its first step is in (queued, in prefill),
then by its response (`oai_server.http.sse`) while it streams.

One plain task watches, and the work runs in the request's own task: an anyio task
group (a task per side, a cancellation to end the watch) cost more per request than
the rest of the route together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

T = TypeVar("T")


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> asyncio.Task[None]:
    """A task that cancels `scope` when the client disconnects; cancel it once done."""
    return asyncio.ensure_future(_cancel_on_disconnect(receive, scope))


async def until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Await `work`; raise `ClientDisconnect` (after cancelling it) if the client leaves."""
    with anyio.CancelScope() as scope:
        watcher = watch_disconnect(request.receive, scope)
        try:
            return await work
        finally:
            watcher.cancel()
    raise ClientDisconnect()
