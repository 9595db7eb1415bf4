"""The production server with the fake engine in a process of its own (signals, exit status)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

# Waits for what must come (the server up, the signal handled), bounded generously: a start
# that takes a second on a quiet machine took over 20 s on one whose memory other engines had
# taken (the page cache gone, every import read from disk). Never the measure of anything.
START_TIMEOUT_S = 120.0
SIGNAL_TIMEOUT_S = 30.0


@dataclass
class Proc:
    root: str
    proc: subprocess.Popen[bytes]
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def until_draining(
    http: httpx.AsyncClient, timeout_s: float = SIGNAL_TIMEOUT_S
) -> httpx.Response:
    """/health once it says the server drains (503), after a SIGTERM: how soon the signal
    is handled is up to the machine's load, so it is polled for, not assumed after a sleep."""
    deadline = time.monotonic() + timeout_s
    while (health := await http.get("/health")).status_code == 200:
        assert time.monotonic() < deadline, f"/health still 200 {timeout_s} s after SIGTERM"
        await asyncio.sleep(0.02)
    return health


@contextlib.contextmanager
def fake_server(tmp_path: Path, **options: Any) -> Iterator[Proc]:
    """`tests/production/fake_server.py` on a free port until the block ends (then killed
    if it is still running); `options` are settings, plus the fake engine's `token_delay`."""
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        command = [sys.executable, "-m", "tests.production.fake_server", str(port)]
        proc = subprocess.Popen([*command, json.dumps(options)], stdout=out, stderr=out)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{root}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"not up in {START_TIMEOUT_S} s: {log.read_text()}"
            time.sleep(0.05)
        yield Proc(root, proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
