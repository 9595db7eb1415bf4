"""A real redis-server for the tests: Debian's binary on a free port in a temporary dir.

Shared by every test that needs Redis (rate limits, the response cache): the session
fixture `redis_url` (import it into a conftest), or a `RedisServer` of one's own, which
keeps its port across `stop()` and `start()` (so a client configured with its URL sees
Redis go away and come back) and can `freeze()` (a Redis that hangs). A missing binary
fails the test, it does not skip it (`make test` installs it).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

START_TIMEOUT_S = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """redis-server on one port in `directory`; `start()`, `stop()`, and again."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None, "redis-server is missing: run tests/system_deps.sh"
        self.binary = binary
        self.directory = directory
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "no",
            "--protected-mode", "no",
        ]  # fmt: skip
        log = self.directory / "redis.log"
        with log.open("ab") as out:
            self._proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if self._proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(log.read_text()) from None
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        """Kill the server, as a crash would (no shutdown handshake)."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=10)
            self._proc = None

    def freeze(self) -> None:
        """Stop the process without closing its sockets: Redis hangs, as a slow one does."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGCONT)

    def flush(self) -> None:
        with redis.Redis.from_url(self.url) as client:
            client.flushall()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One redis-server for the session; tests keep apart by their own key names."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
