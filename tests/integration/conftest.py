"""One real server for the whole session: `python -m oai_server` with the embedded model.

It runs as its own process on a free loopback port, exactly as a user starts it, so
the tests see real HTTP, real SSE framing, real disconnects and the real vLLM engine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conformance import AsyncValidatingTransport, ValidatingTransport

MODEL = "smollm2-135m-instruct"
# A bounded answer of the embedded model takes seconds; a minute means something is wrong.
SDK_TIMEOUT_S = 60
# For framework clients whose answers must end by themselves (finish_reason "stop").
BOUNDED_MAX_TOKENS = 64
START_TIMEOUT_S = 900  # the first start converts the model (~20 s) and loads vLLM (~30-70 s)


@dataclass(frozen=True)
class Server:
    base_url: str  # ends in /v1, as OpenAI clients want it
    root: str
    log: Path

    def running_requests(self) -> float:
        """The engine's running-requests gauge, from /metrics."""
        text = httpx.get(f"{self.root}/metrics", timeout=10).text
        for line in text.splitlines():
            if line.startswith("oai_engine_running_requests "):
                return float(line.split()[1])
        raise AssertionError("oai_engine_running_requests missing from /metrics")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(root: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"server not ready in {START_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")


@contextlib.contextmanager
def run_server(log_dir: Path, *flags: str) -> Iterator[Server]:
    """`python -m oai_server` with `flags` on a free port, until the block ends."""
    port = _free_port()
    log = log_dir / "server.log"
    env = {**os.environ, "OAI_LOG_LEVEL": "info"}
    command = [sys.executable, "-m", "oai_server", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen([*command, *flags], stdout=out, stderr=subprocess.STDOUT, env=env)
    root = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(root, proc, log)
        yield Server(base_url=f"{root}/v1", root=root, log=log)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with run_server(tmp_path_factory.mktemp("server")) as running:
        yield running


@pytest.fixture
def sdk_http() -> Iterator[httpx.Client]:
    """An HTTP client for SDKs that checks every response against OpenAI's spec."""
    with httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S) as client:
        yield client


@pytest.fixture
async def sdk_ahttp() -> AsyncIterator[httpx.AsyncClient]:
    """The async twin of `sdk_http`."""
    transport = AsyncValidatingTransport()
    async with httpx.AsyncClient(transport=transport, timeout=SDK_TIMEOUT_S) as client:
        yield client
