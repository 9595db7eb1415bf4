"""A server's engine processes end with it, however the server ends (`kill -9` here).

A stand-in server starts a watchdog and a child process as vLLM starts its engine core;
the real engine's case is `tests/integration/test_engine_death.py`.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

SERVER = """
import subprocess, sys, time
import psutil
from oai_server.engine.vllm.watchdog import Watchdog
dog = Watchdog.start(set())
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
if sys.argv[1] == "named":
    dog.adopt([psutil.Process(engine.pid)])  # as the engine, once started, names them
else:
    time.sleep(1.5)  # the watchdog adopts a starting engine's processes as they appear
print(engine.pid, dog.pid, flush=True)
if sys.argv[1] == "stopped":
    sys.stdin.readline()  # the test has its handles on both processes
    engine.kill()
    engine.wait()
    dog.close()
    print("closed", flush=True)
time.sleep(600)
"""


def _start(how: str) -> tuple[subprocess.Popen[str], psutil.Process, psutil.Process]:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    engine, dog = (psutil.Process(int(pid)) for pid in server.stdout.readline().split())
    return server, engine, dog


@pytest.mark.parametrize("how", ["starting", "named"])
def test_a_killed_server_takes_its_engine_with_it(how: str) -> None:
    server, engine, dog = _start(how)
    try:
        server.kill()
        killed = time.monotonic()
        server.wait(timeout=10)
        _, alive = psutil.wait_procs([engine, dog], timeout=15)
        assert not alive
        assert time.monotonic() - killed < 10
    finally:
        for process in (engine, dog):
            if process.is_running():
                process.kill()
        _close(server)


def test_a_stopped_engine_ends_its_watchdog() -> None:
    server, _engine, dog = _start("stopped")
    assert server.stdin is not None
    assert server.stdout is not None
    try:
        server.stdin.write("stop\n")
        server.stdin.flush()
        assert server.stdout.readline() == "closed\n"
        assert not dog.is_running()
    finally:
        server.kill()
        server.wait()
        _close(server)


def _close(server: subprocess.Popen[str]) -> None:
    for pipe in (server.stdin, server.stdout):
        if pipe is not None:
            pipe.close()
