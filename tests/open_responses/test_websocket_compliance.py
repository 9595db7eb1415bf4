"""The Open Responses suite's WebSocket checks, ported to Python, against the real server.

Our own port of the `websocket-*` tests of `src/lib/compliance-tests.ts` at the commit
`schema.SPEC_COMMIT` names: the same turns on the same sockets, the same verdicts.
Every `response.create` sent is checked against the spec's `WebSocketResponseCreateEvent`,
every event received against the streaming event of its type (an `error` against
`WebSocketErrorEvent`), every terminal response against `ResponseResource`. The session's
server (the embedded model, `tests.integration.conftest`) answers. Bounds the suite does not
set, for a 135M model on a shared CPU: `temperature: 0` and `max_output_tokens: 128`, so
each answer ends the same way each run, and 120 s (not 30) for a terminal event.
On their own these checks pass once the Response objects are valid Open Responses ones
(`top_logprobs` an integer, `usage` on every response event).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import websockets

from tests.integration.conftest import MODEL, Server, server, trace_receiver
from tests.open_responses.schema import _spec, validate

pytestmark = pytest.mark.integration
__all__ = ["server", "trace_receiver"]  # the session's server, shared with the integration tests

# The suite waits 30 s for a terminal event; a shared 2-core CPU may need longer.
TERMINAL_TIMEOUT_S = 120.0
TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})
# Greedy, and bounded well above what the suite's prompts (a word, a count) take.
BOUNDED = {"temperature": 0, "max_output_tokens": 128}


@functools.cache
def event_components() -> dict[str, str]:
    """The streaming event component of each event type the spec names."""
    found: dict[str, str] = {}
    for name, schema in _spec()["components"]["schemas"].items():
        kinds = schema.get("properties", {}).get("type", {}).get("enum", [])
        if name.endswith("StreamingEvent") and len(kinds) == 1:
            found[kinds[0]] = name
    # Over a socket an error is the WebSocket error envelope, not the SSE error event.
    found["error"] = "WebSocketErrorEvent"
    return found


@dataclass
class Turn:
    """One `response.create` and what came back for it."""

    events: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def error_code(self) -> str | None:
        code: str | None = None
        if self.error is not None:
            code = self.error["error"].get("code")
        elif self.final is not None and self.final.get("error"):
            code = self.final["error"].get("code")
        return code

    @property
    def failed(self) -> bool:
        return self.error is not None or (self.final or {}).get("status") == "failed"

    def completed(self) -> dict[str, Any]:
        """The terminal response, checked as the suite checks it: valid, and completed."""
        assert self.events, "no events"
        assert self.final is not None, f"no terminal response: {self.error}"
        validate(self.final, "ResponseResource")
        assert self.final["status"] == "completed"
        return self.final


Step = dict[str, Any] | Callable[[list[Turn]], dict[str, Any]]


def create(**body: Any) -> dict[str, Any]:
    return {"type": "response.create", "model": MODEL, **BOUNDED, **body}


async def session(root: str, steps: list[Step], *, check_requests: bool = True) -> list[Turn]:
    """Run `steps` on one socket, each after the previous one's terminal event."""
    url = root.replace("http", "ws", 1) + "/v1/responses"
    turns: list[Turn] = []
    async with websockets.connect(url) as ws:
        for step in steps:
            body = step(turns) if callable(step) else step
            if check_requests:
                validate(body, "WebSocketResponseCreateEvent")
            await ws.send(json.dumps(body))
            turns.append(await receive_turn(ws))
    return turns


async def receive_turn(ws: Any) -> Turn:
    turn = Turn()
    async with asyncio.timeout(TERMINAL_TIMEOUT_S):
        while True:
            event = json.loads(await ws.recv())
            validate(event, event_components()[event["type"]])
            turn.events.append(event)
            if event["type"] in TERMINAL:
                turn.final = event["response"]
                return turn
            if event["type"] == "error":
                turn.error = event
                return turn


def response_id(turns: list[Turn]) -> str:
    first = turns[0].completed()
    rid: str = first["id"]
    return rid


async def test_websocket_response(server: Server) -> None:
    turns = await session(
        server.root,
        [
            create(
                input=[{"type": "message", "role": "user", "content": "Count from 1 to 3."}],
                # Greedy, the embedded model answers "1. 1. 1. ..." to the bound.
                frequency_penalty=1.0,
            )
        ],
    )
    turns[0].completed()


async def test_websocket_sequential_responses(server: Server) -> None:
    turns = await session(
        server.root,
        [
            create(store=False, input="Reply with exactly: first"),
            create(store=False, input="Reply with exactly: second"),
        ],
    )
    for turn in turns:
        turn.completed()


async def test_websocket_continuation(server: Server) -> None:
    turns = await session(
        server.root,
        [
            create(store=False, input="Remember the code word: cobalt. Reply with OK."),
            lambda done: create(
                store=False,
                previous_response_id=response_id(done),
                input="What is the code word? Reply with only the code word.",
            ),
        ],
    )
    second = turns[1].completed()
    assert second["previous_response_id"] == turns[0].completed()["id"]


async def test_websocket_generate_false(server: Server) -> None:
    turns = await session(
        server.root,
        [
            create(
                store=False,
                generate=False,
                instructions="You are terse.",
                input="Remember the code word: quartz.",
            ),
            lambda done: create(
                store=False,
                previous_response_id=response_id(done),
                instructions="You are terse.",
                input="What is the code word?",
            ),
        ],
    )
    assert turns[0].completed()["output"] == []
    turns[1].completed()


async def test_websocket_previous_response_not_found(server: Server) -> None:
    turns = await session(
        server.root,
        [
            create(
                store=False,
                previous_response_id="resp_openresponses_missing_0",
                input="This should fail because the previous response is missing.",
            )
        ],
    )
    assert turns[0].error_code == "previous_response_not_found"


async def test_websocket_failed_continuation_evicts_cache(server: Server) -> None:
    orphan = {
        "type": "function_call_output",
        "call_id": "call_openresponses_missing",
        "output": "No matching tool call exists in the previous response.",
    }
    turns = await session(
        server.root,
        [
            create(store=False, input="Remember the code word: ember. Reply with OK."),
            lambda done: create(
                store=False, previous_response_id=response_id(done), input=[orphan]
            ),
            lambda done: create(
                store=False,
                previous_response_id=response_id(done),
                input="Try to continue after the failed turn. Reply with exactly: stale",
            ),
        ],
    )
    assert turns[1].failed
    assert turns[2].error_code == "previous_response_not_found"


async def test_websocket_reconnect_store_false_recovery(server: Server) -> None:
    first = await session(
        server.root,
        [create(store=False, input="Remember the code word: copper. Reply with OK.")],
    )
    reconnected = await session(
        server.root,
        [
            create(
                store=False,
                previous_response_id=response_id(first),
                input="Try to continue after reconnect. Reply with exactly: reconnected",
            ),
            create(
                store=False,
                input=[
                    {
                        "type": "message",
                        "role": "user",
                        "content": "The previous store:false chain could not continue after "
                        "reconnect. Start a new response and reply with exactly: recovered",
                    }
                ],
            ),
        ],
    )
    assert reconnected[0].error_code == "previous_response_not_found"
    reconnected[1].completed()
