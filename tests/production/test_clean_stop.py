"""Ctrl-C or SIGTERM: the server's log ends in its own format, with no traceback."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.production.processes import fake_server

# The fake server's format (tests/production/fake_server.py): every line starts with a time.
SERVER_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_server_logs_in_its_own_format_only(tmp_path: Path, sig: signal.Signals) -> None:
    with fake_server(tmp_path) as server:
        server.proc.send_signal(sig)
        code = server.proc.wait(timeout=30)
        log = server.log.read_text()

    assert code == 0, log
    assert "Traceback" not in log, log
    assert "Exception ignored" not in log, log
    strangers = [line for line in log.splitlines() if not SERVER_LINE.match(line)]
    assert not strangers, log
    assert "Shutting down" in log  # uvicorn's own lines are there, in the server's format
