"""Queue limits: past `--max-num-queued-reqs` or `--max-num-queued-tokens` a request gets a
503 at once (which limit, in its message), and nothing already admitted is lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from oai_server.observability.metrics import WAITING_REQUESTS
from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, Server, run_server

pytestmark = pytest.mark.integration

HI = [{"role": "user", "content": "Hi"}]
LONG = {"model": MODEL, "messages": HI, "max_tokens": 40, "ignore_eos": True}
SHORT = {"model": MODEL, "messages": HI, "max_tokens": 1}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that runs two requests at most, and admits none while one is in prefill."""
    flags = ("--max-num-queued-reqs", "2", "--max-num-queued-tokens", "1")
    with run_server(tmp_path_factory.mktemp("limited"), *flags) as server:
        yield server


def client(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, transport=ValidatingTransport(), timeout=60)


def waiting(server: Server) -> float:
    """The server's gauge of requests in the engine with no output yet."""
    metrics = httpx.get(f"{server.root}/metrics", timeout=10).text
    line = next(line for line in metrics.splitlines() if line.startswith(WAITING_REQUESTS + " "))
    return float(line.split()[1])


def test_requests_past_the_queue_limit_are_shed(limited: Server) -> None:
    with (
        client(limited) as http,
        http.stream("POST", "/chat/completions", json={**LONG, "stream": True}) as first,
        http.stream("POST", "/chat/completions", json={**LONG, "stream": True}) as second,
    ):
        events = [first.iter_lines(), second.iter_lines()]
        for stream in events:
            next(line for line in stream if line.startswith("data: {"))
        shed = http.post("/chat/completions", json=SHORT)
        assert shed.status_code == 503
        error = shed.json()["error"]
        assert (error["code"], "busy" in error["message"]) == ("server_overloaded", True)
        rests = [[line for line in stream if line] for stream in events]
    # The requests already admitted ran to the end, untouched.
    for rest in rests:
        assert rest[-1] == "data: [DONE]"
        assert '"finish_reason":"length"' in "".join(rest)
    with client(limited) as http:
        assert http.post("/chat/completions", json=SHORT).status_code == 200


def test_requests_behind_a_long_prefill_are_shed(limited: Server) -> None:
    # About 1,900 prompt tokens: a prefill long enough to arrive during.
    prompt = "the " * 1900
    outcome: list[httpx.Response] = []
    with client(limited) as http:
        body = {"model": MODEL, "prompt": prompt, "max_tokens": 1}
        worker = threading.Thread(
            target=lambda: outcome.append(http.post("/completions", json=body))
        )
        worker.start()
        # Long prompts are tokenized off the event loop: the short requests start once the
        # long one is in the engine (queued or in prefill), not before it (one of them
        # would then be in prefill first, and the long one rightly shed).
        while worker.is_alive() and waiting(limited) == 0:
            time.sleep(0.005)
        answers = []
        while worker.is_alive():
            answers.append(http.post("/chat/completions", json=SHORT))
        worker.join()
        assert outcome[0].status_code == 200, outcome[0].text
        shed = [a.json()["error"] for a in answers if a.status_code == 503]
        assert any("prefill" in e["message"] for e in shed), [a.status_code for a in answers]
        assert all(a.status_code in (200, 503) for a in answers)
        assert http.post("/chat/completions", json=SHORT).status_code == 200
