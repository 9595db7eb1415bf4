"""Our app with the fake engine, served from a thread of the benchmark's own process.

For the benchmarks that measure one feature's cost (the store, the Responses API) rather
than the engine: a scripted token delay stands in for the model, uvicorn runs the app on
its own event loop in a thread, and the client runs on the main loop.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from benchmarks.metrics import percentile

if TYPE_CHECKING:
    from fastapi import FastAPI

MODEL = "smollm2-135m-instruct"


def fake_app(store_url: str, reply: str = "tok", token_delay: float = 0.0) -> FastAPI:
    """The server's app over a store at `store_url`, the fake engine answering `reply`."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    engine = FakeEngine(reply=reply, token_delay=token_delay)
    return create_app(Settings(store_url=store_url, log_level="warning"), engine)


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Serve `app` on a free loopback port from a thread until the block ends; its root URL."""
    import uvicorn

    from benchmarks.server_process import free_port

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    time.sleep(0.2)  # the fake engine starts with the app
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def add_load_options(parser: argparse.ArgumentParser, store_url: str) -> None:
    """The store and the closed-loop load of a feature-cost benchmark on the fake engine."""
    parser.add_argument("--store-url", default=store_url)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=320, help="per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--token-delay", type=float, default=0.01, metavar="S")


def latency_summary(seconds: Sequence[float]) -> str:
    """p50 and p99 of `seconds`, in milliseconds."""
    p99 = percentile(seconds, 99) or 0.0
    return f"p50 {statistics.median(seconds) * 1000:.2f} ms  p99 {p99 * 1000:.2f} ms"
