"""A real redis-server for the tests: Debian's binary on a free port in a temporary dir.

Shared by every test that needs Redis (rate limits, the response cache): use the
session fixture `redis_url` (import it into a conftest), or `run_redis(tmp_dir)`
directly. A missing binary fails the test, it does not skip it (`make test` installs it).
"""

from __future__ import annotations

import contextlib
import shutil
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


@contextlib.contextmanager
def run_redis(directory: Path) -> Iterator[str]:
    """redis-server in `directory` (no persistence) until the block ends; yield its URL."""
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is missing: run tests/system_deps.sh"
    port = _free_port()
    command = [
        binary,
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(directory),
        "--save", "",
        "--appendonly", "no",
        "--protected-mode", "no",
    ]  # fmt: skip
    log = (directory / "redis.log").open("wb")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((directory / "redis.log").read_text()) from None
                time.sleep(0.02)
        client.close()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One redis-server for the session; tests keep apart by their own key names."""
    with run_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url
