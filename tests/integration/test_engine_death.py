"""The engine's process dies under load: 503 at once, streams end cleanly, the server exits."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conformance import validating_client
from tests.integration.conftest import MODEL, run_server

pytestmark = pytest.mark.integration

LONG = {"max_tokens": 2000, "ignore_eos": True}  # cut short by the kill, never run out


def _engine_core(server_pid: int) -> psutil.Process:
    children = psutil.Process(server_pid).children(recursive=True)
    cores = [c for c in children if "EngineCore" in c.name() + " ".join(c.cmdline())]
    assert len(cores) == 1, [(c.pid, c.name()) for c in children]
    return cores[0]


def test_engine_death_fails_requests_and_exits_non_zero(tmp_path: Path) -> None:
    with run_server(tmp_path) as server, validating_client(timeout=60) as http:
        core = _engine_core(server.proc.pid)
        children = psutil.Process(server.proc.pid).children(recursive=True)
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Count."}], **LONG}
        whole: list[httpx.Response] = []
        waiter = threading.Thread(
            target=lambda: whole.append(http.post(f"{server.base_url}/chat/completions", json=body))
        )
        events: list[str] = []
        with http.stream(
            "POST", f"{server.base_url}/chat/completions", json={**body, "stream": True}
        ) as stream:
            lines = stream.iter_lines()
            for line in lines:
                if line.startswith("data: "):
                    events.append(line[6:])
                    break
            waiter.start()
            time.sleep(0.3)
            killed = time.monotonic()
            core.kill()
            health = 200
            while health == 200 and time.monotonic() - killed < 10:
                health = httpx.get(f"{server.root}/health", timeout=5).status_code
            to_503 = time.monotonic() - killed
            events += [line[6:] for line in lines if line.startswith("data: ")]
        waiter.join(30)
        code = server.proc.wait(timeout=30)
        to_exit = time.monotonic() - killed
        _, alive = psutil.wait_procs(children, timeout=10)
    print(
        f"engine death: /health 503 after {to_503:.2f} s, exit {code} after {to_exit:.2f} s, "
        f"{len(alive)} engine processes left"
    )
    assert health == 503
    assert to_503 < 2
    assert events[-1] == "[DONE]"
    errors = [json.loads(e)["error"] for e in events[:-1] if "error" in json.loads(e)]
    assert len(errors) == 1
    assert errors[0]["type"] == "service_unavailable"
    assert whole[0].status_code == 503
    assert code == 3
    assert to_exit < 10, server.log.read_text()[-3000:]
    assert not alive


def test_a_killed_server_takes_its_engine_with_it(tmp_path: Path) -> None:
    # `kill -9` (or the OOM killer) leaves the server no moment to stop its engine: its
    # core and workers ran on, orphaned, holding the model's memory.
    with run_server(tmp_path, exit_code=None) as server:
        engine = [
            p
            for p in psutil.Process(server.proc.pid).children(recursive=True)
            if "watchdog" not in " ".join(p.cmdline())
        ]
        assert any("EngineCore" in p.name() + " ".join(p.cmdline()) for p in engine)
        server.proc.kill()
        killed = time.monotonic()
        server.proc.wait(timeout=10)
        _, alive = psutil.wait_procs(engine, timeout=30)
        gone_after = time.monotonic() - killed
    print(f"kill -9: {len(engine)} engine processes, gone after {gone_after:.2f} s")
    assert not alive, [(p.pid, p.name()) for p in alive]
