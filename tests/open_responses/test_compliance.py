"""The Open Responses compliance suite's HTTP checks, ported, against the real engine.

Our own Python port of what `bin/compliance-test.ts` of openresponses/openresponses
checks over HTTP (its six WebSocket checks are `tests/responses` WebSocket mode's), pinned
to the commit the vendored spec is from (`schema.SPEC_COMMIT`): each request as the suite
sends it, each answer checked as the suite checks it (the whole response against
`ResponseResource`, every streamed event against its event schema, then what the check
is about). The session's server answers with the embedded model; the image check needs
a vision model and runs against the test VLM (`tests/vision/test_open_responses_image.py`).

Two bounds the suite does not set, for a 135M model on a CPU: `max_output_tokens` and
`temperature: 0` (but where the model's own defaults end its answer and greedy decoding
does not), so each answer ends, the same way each run; and `tool_choice:
"required"` in the tool checks, since the check is about the wire, not whether so small a
model chooses the tool by itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conformance import validating_client
from tests.integration.conftest import MODEL, Server
from tests.open_responses.checks import create, stream_events, user
from tests.open_responses.schema import errors

pytestmark = pytest.mark.integration

BOUNDS = {"max_output_tokens": 128, "temperature": 0}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a location",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {
                "type": "string",
                "description": "The city and state, e.g. San Francisco, CA",
            }
        },
        "required": ["location"],
    },
}


ASK_WEATHER = {
    "input": [user("What's the weather like in San Francisco?")],
    "tools": [WEATHER],
    "tool_choice": "required",
}


# The suite's checks whose request is one `POST /responses`: id -> (body, streamed).
CHECKS: dict[str, tuple[dict[str, Any], bool]] = {
    "basic-response": ({"input": [user("Say hello in exactly 3 words.")]}, False),
    # At temperature 0 this model counts on past 5 to the cap; its own sampling defaults
    # (SmolLM2's generation config) end after "5. 5".
    "streaming-response": ({"input": [user("Count from 1 to 5.")], "temperature": None}, True),
    "system-prompt": (
        {
            "input": [
                {
                    "type": "message",
                    "role": "system",
                    "content": "You are a pirate. Always respond in pirate speak.",
                },
                user("Say hello."),
            ]
        },
        False,
    ),
    "tool-calling": (ASK_WEATHER, False),
    "multi-turn": (
        {
            "input": [
                user("My name is Alice."),
                {
                    "type": "message",
                    "role": "assistant",
                    "content": "Hello Alice! Nice to meet you. How can I help you today?",
                },
                user("What is my name?"),
            ]
        },
        False,
    ),
    # An agent's history: assistant messages labelled with their `phase`, sent back.
    "assistant-phase": (
        {
            "input": [
                user("Rename the file."),
                {
                    "type": "message",
                    "role": "assistant",
                    "content": "I will look at the directory first.",
                    "phase": "commentary",
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "content": "Done: notes.txt is now todo.txt.",
                    "phase": "final_answer",
                },
                user("Thanks. What did you rename?"),
            ]
        },
        False,
    ),
}


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    """A client to the session's server that checks every answer against OpenAI's spec too."""
    with validating_client(base_url=server.root, timeout=300) as client:
        yield client


@pytest.mark.parametrize("check", list(CHECKS))
def test_one_request_checks(http: httpx.Client, check: str) -> None:
    body, streamed = CHECKS[check]
    response = create(http, {"model": MODEL, **BOUNDS, **body}, streamed)
    assert response["output"], "the response has no output items"
    assert response["status"] == "completed"
    if check == "tool-calling":
        assert "function_call" in [item["type"] for item in response["output"]]


def test_tool_calling_streaming(http: httpx.Client) -> None:
    events = stream_events(http, {"model": MODEL, **BOUNDS, **ASK_WEATHER})
    response = events[-1]["response"]
    assert errors(response, "ResponseResource") == []
    assert "function_call" in [item["type"] for item in response["output"]]
    kinds = [event["type"] for event in events]
    item_kinds = {(e["type"], (e.get("item") or {}).get("type")) for e in events}
    assert ("response.output_item.added", "function_call") in item_kinds
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    assert ("response.output_item.done", "function_call") in item_kinds


HISTORY = [
    user("My name is Alice and I am planning a trip to Lisbon in June."),
    {"type": "message", "role": "assistant", "content": "Lisbon in June is lovely, Alice."},
    user("I will travel with my dog, Rex."),
]


@pytest.fixture(scope="module")
def compacted(http: httpx.Client) -> dict[str, Any]:
    answer = http.post("/v1/responses/compact", json={"model": MODEL, "input": HISTORY})
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_compact_returns_a_compaction(compacted: dict[str, Any]) -> None:
    assert errors(compacted, "CompactResource") == []
    assert compacted["output"][-1]["type"] == "compaction"
    assert [item["type"] for item in compacted["output"]].count("compaction") == 1


def test_a_compaction_item_carries_the_conversation_on(
    http: httpx.Client, compacted: dict[str, Any]
) -> None:
    body = {"model": MODEL, **BOUNDS, "input": [*compacted["output"], user("What is my name?")]}
    response = create(http, body)
    assert response["status"] == "completed"
    assert response["output"]


def test_context_management_compacts_a_long_input(http: httpx.Client) -> None:
    counted = http.post("/v1/responses/input_tokens", json={"model": MODEL, "input": HISTORY})
    threshold = counted.json()["input_tokens"] - 1  # just past it
    body = {
        "model": MODEL,
        **BOUNDS,
        "input": HISTORY,
        "context_management": [{"type": "compaction", "compact_threshold": threshold}],
    }
    response = create(http, body)
    assert response["status"] == "completed"
    assert response["usage"]["input_tokens"] != counted.json()["input_tokens"]
