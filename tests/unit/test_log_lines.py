"""What a client chooses cannot write lines of its own into the server's log."""

from __future__ import annotations

import logging
import subprocess
import sys

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve_async

FORGED = "2026-11-29 04:00:00,000 INFO oai_server.access: request_id=forged"


async def test_a_path_with_a_newline_writes_one_access_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="oai_server.access")
    app = create_app(Settings(api_key=["sk-test"]), FakeEngine())
    async with serve_async(app) as root, httpx.AsyncClient() as http:
        for raw in ("/v1/x%0a", "/v1/x%0d%0a", "/v1/x%e2%80%a8", "/v1/x%1b[2J%0b%0c%85"):
            answer = await http.get(f"{root}{raw}{FORGED.replace(' ', '%20')}")
            assert answer.status_code == 401
    lines = [r.getMessage() for r in caplog.records if r.name == "oai_server.access"]
    assert len(lines) == 4
    for line in lines:
        assert line.isprintable(), line
        assert "request_id=forged" in line  # still there, as text on the one line
    assert "/v1/x\\n2026-11-29" in lines[0]


async def test_a_websocket_without_a_key_is_refused_with_no_error_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    app = create_app(Settings(api_key=["sk-test"]), FakeEngine())
    async with serve_async(app, log_level="info") as root:
        url = root.replace("http", "ws")
        for path in ("/v1/realtime?model=m", "/v1/realtime"):
            with pytest.raises(InvalidStatus) as refused:
                async with websockets.connect(f"{url}{path}"):
                    pass
            assert refused.value.response.status_code == 401
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


def test_every_logged_message_is_one_line_whatever_its_arguments() -> None:
    # The server's own log format (`configure_logging`), in a process of its own: a model
    # name a client sent, logged anywhere, cannot start a line; a traceback still can.
    script = (
        "import logging\n"
        "from oai_server.startup import configure_logging\n"
        "configure_logging('info')\n"
        "log = logging.getLogger('oai_server.models')\n"
        f"log.warning('no model %s', 'm\\n{FORGED}\\u2028\\x1b[2J')\n"
        "try:\n"
        "    raise ValueError('boom')\n"
        "except ValueError:\n"
        "    log.exception('failed\\n')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    lines = run.stderr.splitlines()
    assert lines[0].endswith(f"WARNING oai_server.models: no model m\\n{FORGED}\\u2028\\x1b[2J")
    assert not [line for line in lines if line.startswith(FORGED)]
    assert lines[1].endswith("ERROR oai_server.models: failed")
    assert lines[2] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: boom"
