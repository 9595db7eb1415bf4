"""`--max-num-queued-reqs`: past the limit a request gets a 503 at once, nothing queued is lost."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, run_server

pytestmark = pytest.mark.integration

HI = [{"role": "user", "content": "Hi"}]


def test_requests_past_the_queue_limit_are_shed(tmp_path: Path) -> None:
    with (
        run_server(tmp_path, "--max-num-queued-reqs", "1") as server,
        httpx.Client(base_url=server.base_url, transport=ValidatingTransport(), timeout=60) as http,
    ):
        long = {"model": MODEL, "messages": HI, "max_tokens": 40, "ignore_eos": True}
        with http.stream("POST", "/chat/completions", json={**long, "stream": True}) as first:
            assert first.status_code == 200
            events = first.iter_lines()
            next(line for line in events if line.startswith("data: {"))
            shed = http.post("/chat/completions", json={**long, "max_tokens": 2})
            assert shed.status_code == 503
            assert shed.json()["error"]["code"] == "server_overloaded"
            rest = [line for line in events if line]
        # The request already admitted ran to the end, untouched.
        assert rest[-1] == "data: [DONE]"
        assert '"finish_reason":"length"' in "".join(rest)
        again = http.post("/chat/completions", json={**long, "max_tokens": 2})
        assert again.status_code == 200
