"""A server under test as a child process: started, awaited until healthy, stopped for good.

The server runs in a session (and process group) of its own, so stopping it reaches the
processes it started too, such as vLLM's engine core. Stopping is what an orchestrator does:
SIGTERM to the server alone, so that it shuts its engine down in order, then SIGKILL to
whatever is left of the group after a grace period. Its stdout and stderr go to a
log file, which is also where the engine says which settings it actually used.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"


class ServerStartError(RuntimeError):
    """The server exited, or was not healthy in time; the message ends with its log's tail."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (another process could take it before it is used)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log file ("" if it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class ServerProcess:
    """One start of a server command; `started_s` is how long it took to answer `ready_path`."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        port: int,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        ready_path: str = "/health",
    ) -> None:
        self.command = list(command)
        self.port = port
        self.log_path = log_path
        self.env = dict(os.environ if env is None else env)
        self.ready_path = ready_path
        self.started_s: float | None = None
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        if self._popen is None:
            raise RuntimeError("the server has not been started")
        return self._popen.pid

    def start(self, timeout_s: float = 600.0) -> float:
        """Start the command and wait until `ready_path` answers 200; return the seconds taken."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        logger.info("starting %s", " ".join(self.command))
        began = time.perf_counter()
        with self.log_path.open("wb") as log:
            self._popen = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**self.env, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        deadline = began + timeout_s
        with httpx.Client(base_url=self.root_url, timeout=5.0, trust_env=False) as client:
            while True:
                if self._popen.poll() is not None:
                    raise self._failure(f"exited with status {self._popen.returncode}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.ready_path).status_code == 200:
                        break
                if time.perf_counter() > deadline:
                    self.stop()
                    raise self._failure(f"not ready after {timeout_s:.0f} s")
                time.sleep(0.25)
        self.started_s = time.perf_counter() - began
        return self.started_s

    def _failure(self, what: str) -> ServerStartError:
        return ServerStartError(
            f"{self.command[0]} ... {what}; log {self.log_path}:\n{log_tail(self.log_path)}"
        )

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM to the server, SIGKILL to its group after `grace_s`; wait until all exit."""
        if self._popen is None:
            return
        group = self._popen.pid  # the session leader: its pid is the group id
        with contextlib.suppress(ProcessLookupError):
            self._popen.send_signal(signal.SIGTERM)
        try:
            self._popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            logger.warning("%s did not exit in %.0f s: killing it", self.command[0], grace_s)
        # Children still alive after the leader exits (or leader stuck): no second chance.
        deadline = time.monotonic() + 5
        while _group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _group_alive(group):
            _signal_group(group, signal.SIGKILL)
        self._popen.wait()
        deadline = time.monotonic() + 10
        while _group_alive(group):
            if time.monotonic() > deadline:
                logger.warning("processes of group %d outlived SIGKILL", group)
                break
            time.sleep(0.1)
        self._popen = None


def _signal_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, sig)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.contextmanager
def running(server: ServerProcess, timeout_s: float = 600.0) -> Iterator[ServerProcess]:
    """Start `server`, yield it once healthy, and stop it whatever happens."""
    try:
        server.start(timeout_s)
        yield server
    finally:
        server.stop()
