"""How the ported compliance checks send a request and check its answer, as the suite does:
the whole response against `ResponseResource`, every streamed event against its schema."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.open_responses.schema import errors, event_errors


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def stream_events(http: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every event of a streamed answer, each checked against its Open Responses schema."""
    with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as answer:
        assert answer.status_code == 200, answer.read()
        lines = [line for line in answer.iter_lines() if line.startswith("data: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    assert events, "no streaming events received"
    problems = {
        f"{i} {e['type']}": event_errors(e) for i, e in enumerate(events) if event_errors(e)
    }
    assert problems == {}
    return events


def create(http: httpx.Client, body: dict[str, Any], streamed: bool = False) -> dict[str, Any]:
    """The finished response (a stream's last event's), checked against `ResponseResource`."""
    if streamed:
        response: dict[str, Any] = stream_events(http, body)[-1]["response"]
    else:
        answer = http.post("/v1/responses", json=body)
        assert answer.status_code == 200, answer.text
        response = answer.json()
    assert errors(response, "ResponseResource") == []
    return response
