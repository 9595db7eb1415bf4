"""Cancel work for a client that has gone away before its answer was ready.

A non-streamed request sends nothing until the engine is done, so a closed
connection would go unnoticed, and the engine would keep generating for nobody.
`until_disconnect` races the work against the ASGI `http.disconnect` message and
cancels the work (which aborts its engine request) when the client leaves first.
A stream is watched the same way until its first step is in (queued, in prefill);
from then on Starlette cancels its body iterator on disconnect.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import anyio
from starlette.requests import ClientDisconnect, Request

T = TypeVar("T")


async def until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Await `work`; raise `ClientDisconnect` (after cancelling it) if the client leaves."""
    result: list[T] = []
    failure: list[Exception] = []

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            # Caught here so the caller sees the typed error, not an ExceptionGroup.
            try:
                result.append(await work)
            except Exception as exc:  # noqa: BLE001
                failure.append(exc)
            tg.cancel_scope.cancel()

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        tg.start_soon(watch)
    if failure:
        raise failure[0]
    if not result:
        raise ClientDisconnect()
    return result[0]
