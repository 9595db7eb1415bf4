"""The same conversation, too long for the context, is cut the same way by both APIs."""

from __future__ import annotations

import json
from typing import Any

from starlette.testclient import TestClient

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.items.context import Call, CallOutput, Said, oldest_to_drop
from oai_server.settings import Settings
from tests.conformance import validate

MODEL = "smollm2-135m-instruct"
# An answered call, a long message, then the question. Without the call (the oldest
# item) the rest would fit, but its output would then start the context: it goes too.
ITEMS: list[dict[str, Any]] = [
    {"type": "function_call", "call_id": "call_old", "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_old", "output": "OLD-RESULT"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x" * 150}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What now?"}]},
]
IDS = ["item_call", "item_output", "item_long", "item_question"]


def prompt(engine: FakeEngine, index: int) -> str:
    return bytes(engine.calls[index].prompt_token_ids).decode()


def ask_realtime(client: TestClient) -> list[str]:
    """Send ITEMS over a Realtime socket and ask for a response; the ids it deleted."""
    deleted: list[str] = []
    url = f"/v1/realtime?model={MODEL}"
    with client.websocket_connect(url, subprotocols=["realtime"]) as socket:
        for item, item_id in zip(ITEMS, IDS, strict=True):
            socket.send_text(
                json.dumps({"type": "conversation.item.create", "item": {**item, "id": item_id}})
            )
        socket.send_text(json.dumps({"type": "response.create"}))
        while True:
            event = json.loads(socket.receive_text())
            validate("RealtimeServerEvent", event)
            if event["type"] == "conversation.item.deleted":
                deleted.append(event["item_id"])
            if event["type"] == "response.done":
                assert event["response"]["status"] == "completed"
                return deleted


def test_both_apis_drop_the_same_oldest_items() -> None:
    engine = FakeEngine(reply="ok", max_model_len=220)
    with TestClient(create_app(Settings(), engine)) as client:
        made = client.post(
            "/v1/responses",
            json={"model": MODEL, "input": ITEMS, "truncation": "auto", "store": False},
        )
        assert made.status_code == 200, made.text
        deleted = ask_realtime(client)
    through_responses, through_realtime = prompt(engine, 0), prompt(engine, 1)
    assert through_responses == through_realtime
    assert deleted == ["item_call", "item_output"]
    assert "OLD-RESULT" not in through_realtime
    assert "x" * 150 in through_realtime
    assert "What now?" in through_realtime


def test_a_call_s_output_goes_with_it_and_the_last_item_stays() -> None:
    call, output = Call("c", "f", "{}"), CallOutput("c", "done")
    question = Said("user", "q")
    assert oldest_to_drop([call, output, output, question]) == 3
    assert oldest_to_drop([Said("user", "a"), call, output, question]) == 1
    # Never the item being answered, even a tool result that ends the conversation.
    assert oldest_to_drop([call, output]) == 1
    assert oldest_to_drop([question]) == 0
    assert oldest_to_drop([]) == 0
