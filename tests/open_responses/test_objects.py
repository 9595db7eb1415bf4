"""Every Response object and streamed event, valid against both specifications at once.

The fake engine answers; `validating_client` checks each body and event against OpenAI's
spec as it arrives, and each is checked here against Open Responses' too: text, a
function call, an answer cut at `max_output_tokens` and one that fails mid-stream.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.conformance import validating_client
from tests.live import serve
from tests.open_responses.schema import errors, event_errors
from tests.responses.conftest import CALL, WEATHER
from tests.store.conftest import MODEL

# The engine, the request's options, the stream's last event.
CASES = {
    "text": (FakeEngine(reply="Hello there."), {}, "response.completed"),
    "function call": (FakeEngine(tokens=[CALL]), {"tools": [WEATHER]}, "response.completed"),
    # Echoed with `description`, `parameters` and `strict` null, as both specs have them.
    "bare function tool": (
        FakeEngine(reply="Hello."),
        {"tools": [{"type": "function", "name": "look"}]},
        "response.completed",
    ),
    "incomplete": (
        FakeEngine(reply="one two three four"),
        {"max_output_tokens": 2},
        "response.incomplete",
    ),
    "failed": (FakeEngine(reply="a b c d", fail_at_step=2), {}, "response.failed"),
}


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("case", list(CASES))
def test_responses_and_events_are_valid_open_responses(case: str) -> None:
    engine, options, last = CASES[case]
    body = {"model": MODEL, "input": [{"type": "message", "role": "user", "content": "Hi"}]}
    body |= options
    with serve(create_app(Settings(), engine)) as base, validating_client(base_url=base) as http:
        events = _events(http.post("/v1/responses", json={**body, "stream": True}).text)
        assert events[-1]["type"] == last
        problems = {e["type"]: event_errors(e) for e in events if event_errors(e)}
        assert problems == {}
        if case != "failed":  # a failed generation is a 500 when not streamed
            whole = http.post("/v1/responses", json=body).json()
            assert errors(whole, "ResponseResource") == []
            assert whole["status"] == events[-1]["response"]["status"]
