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
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from tests import parallel
from tests.conformance import AsyncValidatingTransport, ValidatingTransport
from tests.tracing.receiver import Receiver, otlp_grpc_receiver

MODEL = "smollm2-135m-instruct"
EMBEDDING_MODEL = "all-minilm-l6-v2"
# A bounded answer of the embedded model takes seconds; a minute means something is wrong.
SDK_TIMEOUT_S = 60
# For framework clients whose answers must end by themselves (finish_reason "stop").
BOUNDED_MAX_TOKENS = 64
START_TIMEOUT_S = 900  # the first start converts the model (~20 s) and loads vLLM (~30-70 s)
STOP_TIMEOUT_S = 60  # a drain of at most 5 s, then the engine's shutdown


@dataclass(frozen=True)
class Server:
    base_url: str  # ends in /v1, as OpenAI clients want it
    root: str
    log: Path
    proc: subprocess.Popen[bytes]
    # What /health answered while the model loaded, before its first 200.
    loading: list[int] = field(default_factory=list)

    def running_requests(self) -> float:
        """The engine's running-requests gauge, from /metrics."""
        return self.gauge("oai_engine_running_requests")

    def gauge(self, name: str) -> float:
        """A series' value from /metrics, summed over its labels (vLLM's carry some)."""
        text = httpx.get(f"{self.root}/metrics", timeout=10).text
        values = [
            float(line.rsplit(maxsplit=1)[1])
            for line in text.splitlines()
            if line.startswith((f"{name} ", f"{name}{{"))
        ]
        if not values:
            raise AssertionError(f"{name} missing from /metrics")
        return sum(values)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# What the server logs when its engine fails to start (it stays up, /health says 503).
ENGINE_FAILED = "the engine failed to start"


class EngineStartError(RuntimeError):
    """The server is up, but its engine failed to start."""


def _wait_ready(root: str, proc: subprocess.Popen[bytes], log: Path) -> list[int]:
    """Poll `/health` until it answers 200; the statuses it answered until then. Raises
    `EngineStartError` as soon as the log says the engine failed."""
    deadline = time.monotonic() + START_TIMEOUT_S
    statuses: list[int] = []
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        text = log.read_text(errors="replace")
        if ENGINE_FAILED in text:
            raise EngineStartError(text[-4000:])
        try:
            statuses.append(httpx.get(f"{root}/health", timeout=2).status_code)
            if statuses[-1] == 200:
                return statuses
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"server not ready in {START_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")


@dataclass(frozen=True)
class Launched:
    """A server process started by `launch`, not yet known to be ready."""

    proc: subprocess.Popen[bytes]
    root: str
    log: Path


def launch(log_dir: Path, *flags: str) -> Launched:
    """Start `python -m oai_server` with `flags` on a free port; returns at once (the
    engine loads meanwhile: `serving` waits for it)."""
    port = _free_port()
    if "--embedding-model" not in flags and "--models-file" not in flags:
        # The embedding engine costs a start and memory: only servers that test it get it
        # (a models file names every model itself).
        flags = (*flags, "--embedding-model", "none")
    log = log_dir / "server.log"
    env = {**os.environ, "OAI_LOG_LEVEL": "info", "OAI_DRAIN_TIMEOUT": "5"}
    command = [sys.executable, "-m", "oai_server", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen([*command, *flags], stdout=out, stderr=subprocess.STDOUT, env=env)
    return Launched(proc=proc, root=f"http://127.0.0.1:{port}", log=log)


@contextlib.contextmanager
def run_server(log_dir: Path, *flags: str, exit_code: int | None = 0) -> Iterator[Server]:
    """`python -m oai_server` with `flags` on a free port, until the block ends.

    Stopped with SIGTERM, as an orchestrator stops it: it must drain and exit with
    `exit_code` (unless it already exited: a test that kills the engine checks that
    itself; None skips the check), no process it started (the engine core) may
    outlive it, and a clean stop (exit 0) logs no traceback.

    A start whose engine failed for want of memory (vLLM's KV cache check, when the other
    worker's engines hold it at that moment) is tried once more, after a pause.
    """
    started = False
    for attempt in (1, 2):
        try:
            with serving(launch(log_dir, *flags), exit_code=exit_code) as server:
                started = True
                yield server
            return
        except EngineStartError as exc:
            if started or attempt == 2 or "Available memory" not in str(exc):
                raise
            time.sleep(30)


@contextlib.contextmanager
def serving(launched: Launched, exit_code: int | None = 0) -> Iterator[Server]:
    """`run_server` for a server already launched: ready, then stopped as it says."""
    proc, root, log = launched.proc, launched.root, launched.log
    children: list[psutil.Process] = []
    try:
        loading = _wait_ready(root, proc, log)
        children = psutil.Process(proc.pid).children(recursive=True)
        yield Server(base_url=f"{root}/v1", root=root, log=log, proc=proc, loading=loading)
    finally:
        _stop(proc, log, children, exit_code)


def _stop(
    proc: subprocess.Popen[bytes],
    log: Path,
    children: list[psutil.Process],
    exit_code: int | None,
) -> None:
    running = proc.poll() is None
    logged_before_stop = log.stat().st_size
    if running:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the server ignored SIGTERM:\n{log.read_text()[-4000:]}") from None
    # Generous: on a loaded 2-core machine the engine's processes take seconds to exit.
    _, alive = psutil.wait_procs(children, timeout=30)
    for child in alive:
        child.kill()
    assert not alive, f"processes outlived the server: {alive}"
    if running and exit_code is not None:
        assert proc.returncode == exit_code, log.read_text()[-4000:]
    if running and exit_code == 0:
        # A clean stop reads as one: no traceback, not even one Python only prints
        # ("Exception ignored in ...") from a destructor run at interpreter exit.
        with log.open("rb") as read:
            read.seek(logged_before_stop)
            stop_log = read.read().decode(errors="replace")
        for sign in ("Traceback", "Exception ignored"):
            assert sign not in stop_log, stop_log[-4000:]


# The session's server is launched before the first test that needs it (see
# `launch_session_server`), so that its engine loads while other tests run; with it, the
# receiver of its traces.
_launched: list[tuple[Launched, Receiver]] = []
_early = contextlib.ExitStack()


def _session_flags(receiver: Receiver) -> tuple[str, ...]:
    return ("--embedding-model", EMBEDDING_MODEL, "--otlp-traces-endpoint", receiver.endpoint)


def needs_session_server(items: list[pytest.Item]) -> bool:
    """Whether any of `items` uses the session's `server` (this file's, not a module's own)."""
    return any(parallel.shared_group(item) == parallel.SESSION_GROUP for item in items)


def launch_session_server(log_dir: Path) -> None:
    """Start the session's server now; the `server` fixture takes it when first asked."""
    if not _launched:
        receiver = _early.enter_context(otlp_grpc_receiver())
        _launched.append((launch(log_dir, *_session_flags(receiver)), receiver))


def stop_unclaimed_session_server() -> None:
    """Kill the session's server if it was launched but no test asked for it (a run stopped
    early, by -x): it may still be loading, when SIGTERM waits for the engine's start.
    Then close the early receiver (after the `server` fixture stopped its server)."""
    while _launched:
        proc = _launched.pop()[0].proc
        if proc.poll() is not None:
            continue
        with contextlib.suppress(psutil.Error):
            tree = [psutil.Process(proc.pid)]
            tree += tree[0].children(recursive=True)
            for process in tree:
                process.kill()
            psutil.wait_procs(tree, timeout=30)
        proc.wait()
    _early.close()


@pytest.fixture(scope="session")
def trace_receiver() -> Iterator[Receiver]:
    """The OTLP (gRPC) receiver the session's server exports its traces to."""
    if _launched:
        yield _launched[-1][1]  # the early server's: closed after the session
        return
    with otlp_grpc_receiver() as received:
        yield received


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, trace_receiver: Receiver) -> Iterator[Server]:
    """The session's server: the embedded chat model and, beside it, the embedded
    embedding model (the one real-engine session that serves embeddings); it traces every
    request to `trace_receiver`, so the suite runs with tracing on.

    Use it rather than start a server of your own wherever its flags will do
    (docs/development.md, "Sharing the real engine")."""
    if _launched and _launched[-1][1] is trace_receiver:
        launched = _launched.pop()[0]
    else:
        log_dir = tmp_path_factory.mktemp("server")
        launched = launch(log_dir, *_session_flags(trace_receiver))
    with serving(launched) as running:
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
