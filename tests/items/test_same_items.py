"""Realtime and Responses share one item layer: the same conversation is cut the same way,
and an answer folds into the same item events, in either API's order."""

from __future__ import annotations

import json
from typing import Any

from starlette.testclient import TestClient

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.items.context import Call, CallOutput, Said, oldest_to_drop
from oai_server.items.stream import ItemStream
from oai_server.services.events import TextDelta
from oai_server.settings import Settings
from schemas.chat import CreateChatCompletionStreamResponse
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


def _call_chunk(call_id: str) -> CreateChatCompletionStreamResponse:
    return CreateChatCompletionStreamResponse.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0 if call_id == "call_a" else 1,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ]
                    },
                    "finish_reason": None,
                    "logprobs": None,
                }
            ],
        }
    )


def _fold(one_open: bool) -> list[str]:
    """Text, two calls, more text: the item events, as `kind index`."""
    stream = ItemStream(one_open=one_open)
    updates = [
        *stream.feed(TextDelta(0, "Let me look. ")),
        *stream.feed(_call_chunk("call_a")),
        *stream.feed(_call_chunk("call_b")),
        *stream.feed(TextDelta(0, "Done.")),
        *stream.close("completed"),
    ]
    return [f"{type(u).__name__} {u.item.index}" for u in updates]


def test_item_events_in_either_order() -> None:
    # Responses: one item open at a time; text after a call is a new message.
    assert _fold(one_open=True) == [
        "ItemAdded 0", "TextAdded 0", "ItemDone 0",
        "ItemAdded 1", "ArgumentsAdded 1", "ItemDone 1",
        "ItemAdded 2", "ArgumentsAdded 2", "ItemDone 2",
        "ItemAdded 3", "TextAdded 3", "ItemDone 3",
    ]  # fmt: skip
    # Realtime: every item open until the end; all text in the first message.
    assert _fold(one_open=False) == [
        "ItemAdded 0", "TextAdded 0",
        "ItemAdded 1", "ArgumentsAdded 1",
        "ItemAdded 2", "ArgumentsAdded 2",
        "TextAdded 0",
        "ItemDone 0", "ItemDone 1", "ItemDone 2",
    ]  # fmt: skip
