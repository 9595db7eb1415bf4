"""A real uvicorn on a free 127.0.0.1 port: the one live-server helper of the test suite.

In-process ASGI clients buffer whole bodies and never disconnect, so tests of streaming,
disconnects, WebSockets and browsers run the app behind real sockets. `serve(app)` runs it
in a thread (for synchronous clients: the OpenAI SDK, Playwright's sync API, benchmarks);
`serve_async(app)` runs it on the test's own event loop (so a test can inspect the fake
engine between awaits). Both yield the root URL, e.g. `http://127.0.0.1:41234`, once the
app's engine reports healthy.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import uvicorn

from oai_server.http.websocket_denial import WebSocketProtocol

START_TIMEOUT_S = 10.0


def _bound_socket() -> tuple[socket.socket, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock, int(sock.getsockname()[1])


def _config(app: Any, port: int, **overrides: Any) -> uvicorn.Config:
    options: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": port,
        "log_level": "warning",
        "log_config": None,
        "lifespan": "on",
        "timeout_graceful_shutdown": 2,
        # As the server runs it (`oai_server.__main__`).
        "ws": WebSocketProtocol,
    }
    options.update(overrides)
    return uvicorn.Config(app, **options)


async def _engine_ready(app: Any) -> bool:
    server_state = getattr(getattr(app, "state", None), "server", None)
    if server_state is None:
        return True
    try:
        await server_state.engine.check_health()
    except Exception:  # noqa: BLE001 - not ready yet, whatever the reason
        return False
    return True


def _healthy(root: str) -> bool:
    """True once `/health` answers 200 (or the app has no `/health` at all)."""
    try:
        status = httpx.get(f"{root}/health", timeout=2).status_code
    except httpx.TransportError:
        return False
    return status in (200, 404)


@asynccontextmanager
async def serve_async(app: Any, **uvicorn_options: Any) -> AsyncIterator[str]:
    """Serve `app` on this event loop until the block ends; yield its root URL."""
    sock, port = _bound_socket()
    server = uvicorn.Server(_config(app, port, **uvicorn_options))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            while not server.started or not await _engine_ready(app):
                if task.done():
                    task.result()
                    raise RuntimeError("uvicorn did not start")
                await asyncio.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@contextmanager
def serve(app: Any, **uvicorn_options: Any) -> Iterator[str]:
    """Serve `app` from a thread until the block ends; yield its root URL."""
    sock, port = _bound_socket()
    server = uvicorn.Server(_config(app, port, **uvicorn_options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        root = f"http://127.0.0.1:{port}"
        while not server.started or not _healthy(root):
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        yield root
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
