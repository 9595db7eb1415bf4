"""An answered request leaves nothing for the garbage collector, behind a real uvicorn.

What a request leaves in a reference cycle is freed only by a collection, never as its last
reference goes; and the collections such leftovers set going walk every young object of
every request in flight: under the floor's load, two cycles a request set off a collection
every 20-30 requests (about 27 us a request). So a cycle that comes back (an object
holding the request's `scope` reachable from the `scope` itself, a cancelled task's error
holding the frame that holds the task) fails here. The server runs in this process
(`serve_async`), so its garbage is this test's to inspect; the client's own is told apart
by where its code lives.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import CoroutineType, FrameType
from typing import Any

import httpx

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.http.disconnect import Disconnect
from oai_server.settings import Settings
from tests.live import serve_async
from tests.unit.conftest import chat_body

SERVER_PACKAGES = ("oai_server", "uvicorn", "starlette", "fastapi")


def _origin(obj: object) -> str:
    """The module an object of garbage comes from: its type's, or its code's for a frame,
    a coroutine or a task."""
    if isinstance(obj, asyncio.Task):
        obj = obj.get_coro()
    if isinstance(obj, CoroutineType):
        return obj.cr_code.co_filename
    if isinstance(obj, FrameType):
        return obj.f_code.co_filename
    return type(obj).__module__


def _from_server(obj: object) -> bool:
    origin = _origin(obj).replace("\\", "/")
    return any(
        origin.startswith(package + ".") or origin == package or f"/{package}/" in origin
        for package in SERVER_PACKAGES
    )


@contextmanager
def cyclic_garbage() -> Iterator[list[Any]]:
    """Collect what the block leaves in reference cycles into the yielded list (filled as
    the block ends)."""
    found: list[Any] = []
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def _until_watchers_end(timeout_s: float = 10.0) -> None:
    """Until no request's connection watcher (`Disconnect._watch`) is left on this loop:
    one still running holds its request, which would hide (or fake) a cycle."""
    deadline = time.monotonic() + timeout_s
    while any(
        getattr(task.get_coro(), "__qualname__", None) == Disconnect._watch.__qualname__
        for task in asyncio.all_tasks()
    ):
        assert time.monotonic() < deadline, "connection watchers still running"
        await asyncio.sleep(0.005)


async def test_answered_requests_leave_no_reference_cycles() -> None:
    app = create_app(Settings(), FakeEngine(reply="tok"))
    url, body = "/v1/chat/completions", chat_body(max_tokens=4)
    # Both kinds of connection: a kept-alive one keeps its last request's objects (and so
    # hides what they hold), one closed after each request frees them.
    fresh = httpx.Limits(max_keepalive_connections=0)
    async with (
        serve_async(app) as root,
        httpx.AsyncClient(base_url=root) as kept,
        httpx.AsyncClient(base_url=root, limits=fresh) as closed,
    ):
        await kept.post(url, json=body)  # first-use work out of the way
        with cyclic_garbage() as garbage:
            for client in (kept, closed):
                for stream in (True, False, True):
                    response = await client.post(url, json={**body, "stream": stream})
                    assert response.status_code == 200
                    assert ("data: [DONE]" in response.text) is stream
                missing = await client.post(url, json={**body, "model": "no-such-model"})
                assert missing.status_code == 404
            await _until_watchers_end()
        ours = [obj for obj in garbage if _from_server(obj)]
    left = sorted({f"{type(obj).__qualname__} ({_origin(obj)})" for obj in ours})
    assert not left, f"requests left reference cycles: {left}"
