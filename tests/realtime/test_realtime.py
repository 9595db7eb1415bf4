"""The Realtime API's text subset, through the official SDK's realtime client.

Against a real uvicorn with the fake engine (scripted, with delays), every server event
is validated against the spec's `RealtimeServerEvent`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from oai_server.engine.fake import FakeEngine, FakeTokenizer
from tests.realtime.conftest import MODEL, client_for, events_until, realtime_server

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ""}]}


def user_item(text: str) -> dict[str, Any]:
    return {**USER, "content": [{"type": "input_text", "text": text}]}


def prompt_of(engine: FakeEngine, call: int) -> str:
    return FakeTokenizer().decode(engine.calls[call].prompt_token_ids)


@asynccontextmanager
async def connected(engine: FakeEngine) -> AsyncIterator[Any]:
    """A live server around `engine`, and the SDK's realtime connection to it."""
    async with (
        realtime_server(engine) as root,
        client_for(root).realtime.connect(model=MODEL) as conn,
    ):
        yield conn


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


async def test_two_turns_the_second_sees_the_first() -> None:
    engine = FakeEngine(reply="Paris is the capital.", token_delay=0.001)
    async with realtime_server(engine) as root:
        client = client_for(root)
        async with client.realtime.connect(model=MODEL) as conn:
            created = await events_until(conn, "session.created")
            assert created[0]["session"]["model"] == MODEL
            await conn.session.update(
                session={
                    "type": "realtime",
                    "instructions": "Be brief.",
                    "output_modalities": ["text"],
                }
            )
            await events_until(conn, "session.updated")
            await conn.conversation.item.create(item=user_item("Capital of France?"))
            await events_until(conn, "conversation.item.done")
            await conn.response.create()
            first = await events_until(conn, "response.done")
            await conn.conversation.item.create(item=user_item("And of Italy?"))
            await events_until(conn, "conversation.item.done")
            await conn.response.create()
            second = await events_until(conn, "response.done")

    kinds = [e["type"] for e in first]
    assert kinds[:5] == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert kinds[-5:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    assert text_of(first) == engine.reply
    done = first[-1]["response"]
    assert done["status"] == "completed"
    assert done["output"][0]["content"][0]["text"] == engine.reply
    assert done["usage"]["output_tokens"] == len(engine.reply.split(" "))
    # The second prompt holds the instructions and the whole first turn.
    second_prompt = prompt_of(engine, 1)
    for said in ("Be brief.", "Capital of France?", engine.reply, "And of Italy?"):
        assert said in second_prompt
    assert text_of(second) == engine.reply


async def test_cancel_stops_the_reply_and_aborts_the_engine_request() -> None:
    engine = FakeEngine(reply="word " * 300, token_delay=0.02)
    async with connected(engine) as conn:
        await events_until(conn, "session.created")
        await conn.conversation.item.create(item=user_item("Talk."))
        await conn.response.create()
        await events_until(conn, "response.output_text.delta")
        await conn.response.cancel()
        events = await events_until(conn, "response.done")
        response = events[-1]["response"]
        assert response["status"] == "cancelled"
        assert response["status_details"]["reason"] == "client_cancelled"
        assert response["output"][0]["status"] == "incomplete"
        assert engine.aborted == [response["id"]]
        # The session goes on: the partial answer is in the conversation.
        await conn.response.create()
        await conn.response.cancel()
        await events_until(conn, "response.done")
    assert engine.running_requests() == 0


async def test_closing_the_socket_aborts_what_is_generating() -> None:
    # 3,000 tokens of 0.02 s: the reply would run 60 s, so it cannot end on its own within
    # the wait below, and `aborted` (only a request still running is) tells an abort apart.
    engine = FakeEngine(reply="word " * 3000, token_delay=0.02)
    async with realtime_server(engine) as root:
        conn = await client_for(root).realtime.connect(model=MODEL).enter()
        await events_until(conn, "session.created")
        await conn.conversation.item.create(item=user_item("Talk."))
        await conn.response.create()
        await events_until(conn, "response.output_text.delta")
        await conn.close()
        # Generous for a loaded machine: the loop ends as soon as the abort lands.
        deadline = time.monotonic() + 30
        while engine.running_requests() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        assert engine.running_requests() == 0
        assert len(engine.aborted) == 1


async def test_function_calls_stream_as_arguments_deltas() -> None:
    tokens = [
        "Sure.",
        " <tool_call>",
        '{"name": "get_weather", ',
        '"arguments": {"city": "Oslo"}}',
        "</tool_call>",
    ]
    engine = FakeEngine(tokens=tokens)
    tool = {
        "type": "function",
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    async with connected(engine) as conn:
        await events_until(conn, "session.created")
        await conn.session.update(session={"type": "realtime", "tools": [tool]})
        await events_until(conn, "session.updated")
        await conn.conversation.item.create(item=user_item("Weather in Oslo?"))
        await conn.response.create()
        events = await events_until(conn, "response.done")
        deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
        [done] = [e for e in events if e["type"] == "response.function_call_arguments.done"]
        assert done["name"] == "get_weather"
        assert json.loads(done["arguments"]) == {"city": "Oslo"}
        assert "".join(d["delta"] for d in deltas) == done["arguments"]
        call = next(o for o in events[-1]["response"]["output"] if o["type"] == "function_call")
        # The tool's result goes back as an item, and the next prompt carries both.
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": call["call_id"], "output": "-3 C"}
        )
        await events_until(conn, "conversation.item.done")
        engine.tokens = None
        await conn.response.create()
        await events_until(conn, "response.done")
    prompt = prompt_of(engine, 1)
    assert "-3 C" in prompt


async def test_a_function_the_session_forces_is_called() -> None:
    engine = FakeEngine(reply='{"city": "Oslo"}')
    tool = {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    forced = {"type": "function", "name": "get_weather"}
    async with connected(engine) as conn:
        await events_until(conn, "session.created")
        await conn.session.update(
            session={"type": "realtime", "tools": [tool], "tool_choice": forced}
        )
        await events_until(conn, "session.updated")
        await conn.conversation.item.create(item=user_item("Weather in Oslo?"))
        await conn.response.create()
        events = await events_until(conn, "response.done")
    (call,) = events[-1]["response"]["output"]
    assert (call["type"], call["name"]) == ("function_call", "get_weather")
    assert json.loads(call["arguments"]) == {"city": "Oslo"}
    # Forced: the arguments are decoded under the function's schema.
    assert engine.calls[0].options.structured is not None


async def test_items_retrieve_delete_and_truncate() -> None:
    engine = FakeEngine(reply="Hi there.")
    async with connected(engine) as conn:
        await events_until(conn, "session.created")
        await conn.conversation.item.create(item={**user_item("one"), "id": "item_one"})
        await events_until(conn, "conversation.item.done")
        await conn.conversation.item.retrieve(item_id="item_one")
        [retrieved] = (await events_until(conn, "conversation.item.retrieved"))[-1:]
        assert retrieved["item"]["content"][0]["text"] == "one"
        await conn.response.create()
        done = (await events_until(conn, "response.done"))[-1]
        answer_id = done["response"]["output"][0]["id"]
        await conn.conversation.item.truncate(item_id=answer_id, content_index=0, audio_end_ms=0)
        truncated = (await events_until(conn, "conversation.item.truncated"))[-1]
        assert truncated["item_id"] == answer_id
        await conn.conversation.item.delete(item_id="item_one")
        await events_until(conn, "conversation.item.deleted")
        await conn.conversation.item.retrieve(item_id="item_one")
        error = (await events_until(conn, "error"))[-1]["error"]
        assert error["param"] == "item_id"


async def test_the_oldest_items_make_room_when_the_context_is_full() -> None:
    engine = FakeEngine(reply="ok", max_model_len=400)
    async with connected(engine) as conn:
        await events_until(conn, "session.created")
        await conn.session.update(session={"type": "realtime", "instructions": "Keep me."})
        await events_until(conn, "session.updated")
        for i in range(6):
            await conn.conversation.item.create(item={**user_item("x" * 80), "id": f"old_{i}"})
            await events_until(conn, "conversation.item.done")
        await conn.response.create()
        events = await events_until(conn, "response.done")
    deleted = [e["item_id"] for e in events if e["type"] == "conversation.item.deleted"]
    assert deleted
    assert deleted == [f"old_{i}" for i in range(len(deleted))]
    assert events[-1]["response"]["status"] == "completed"
    prompt = prompt_of(engine, 0)
    assert "Keep me." in prompt
    assert len(engine.calls[0].prompt_token_ids) < 400


async def test_truncation_disabled_is_an_error() -> None:
    engine = FakeEngine(reply="ok", max_model_len=100)
    async with connected(engine) as conn:
        await events_until(conn, "session.created")
        await conn.session.update(session={"type": "realtime", "truncation": "disabled"})
        await conn.conversation.item.create(item=user_item("x" * 200))
        await conn.response.create(event_id="evt_big")
        error = (await events_until(conn, "error"))[-1]["error"]
        assert error["code"] == "context_length_exceeded"
        assert error["event_id"] == "evt_big"


async def test_hundred_sessions_share_the_engine_and_keep_their_own_tokens() -> None:
    engine = FakeEngine(reply_for=lambda prompt: prompt.split("<|user|>")[-1].split("\n")[0])
    engine.token_delay = 0.01

    async def session(root: str, i: int) -> str:
        async with client_for(root).realtime.connect(model=MODEL) as conn:
            await events_until(conn, "session.created")
            await conn.conversation.item.create(item=user_item(f"session {i} says hello"))
            await conn.response.create()
            return text_of(await events_until(conn, "response.done"))

    async with realtime_server(engine) as root:
        texts = await asyncio.gather(*(session(root, i) for i in range(100)))
    assert texts == [f"session {i} says hello" for i in range(100)]
    assert len(engine.calls) == 100


async def test_retention_ratio_drops_down_to_that_share_of_the_context() -> None:
    engine = FakeEngine(reply="ok", max_model_len=400)
    ratio = {"type": "retention_ratio", "retention_ratio": 0.5}
    async with connected(engine) as conn:
        await events_until(conn, "session.created")
        await conn.session.update(session={"type": "realtime", "truncation": ratio})
        await events_until(conn, "session.updated")
        for i in range(6):
            await conn.conversation.item.create(item={**user_item(f"{i}" * 80), "id": f"old_{i}"})
            await events_until(conn, "conversation.item.done")
        await conn.response.create()
        events = await events_until(conn, "response.done")
    deleted = [e["item_id"] for e in events if e["type"] == "conversation.item.deleted"]
    assert deleted == [f"old_{i}" for i in range(len(deleted))]
    prompt = prompt_of(engine, 0)
    # Not just enough to fit (about 380 of 400 tokens would): half the context at most.
    assert len(engine.calls[0].prompt_token_ids) <= 200
    assert "5" * 80 in prompt
    assert events[-1]["response"]["status"] == "completed"


async def test_an_out_of_band_response_answers_its_input_and_leaves_the_conversation() -> None:
    engine = FakeEngine(reply="Classified.")
    async with connected(engine) as conn:
        await events_until(conn, "session.created")
        await conn.conversation.item.create(item=user_item("The code word is PEAR."))
        await events_until(conn, "conversation.item.done")
        aside = {"conversation": "none", "input": [user_item("Classify: spam or not?")]}
        await conn.response.create(response=aside)  # type: ignore[arg-type]
        out_of_band = await events_until(conn, "response.done")
        await conn.response.create(response={"conversation": "none"})
        await events_until(conn, "response.done")
        await conn.response.create()
        await events_until(conn, "response.done")
    assert "Classify: spam or not?" in prompt_of(engine, 0)
    assert "PEAR" not in prompt_of(engine, 0)
    assert text_of(out_of_band) == "Classified."
    # Its items were never announced as the conversation's.
    assert not [e for e in out_of_band if e["type"].startswith("conversation.item.")]
    assert [e["type"] for e in out_of_band].count("response.output_item.done") == 1
    # Without input, conversation "none" answers from the instructions alone.
    assert "PEAR" not in prompt_of(engine, 1)
    # The conversation went on as if neither had happened.
    assert "PEAR" in prompt_of(engine, 2)
    assert "Classify" not in prompt_of(engine, 2)
    assert "Classified." not in prompt_of(engine, 2)


async def test_a_response_with_its_own_input_still_joins_the_default_conversation() -> None:
    engine = FakeEngine(reply="Noted.")
    async with connected(engine) as conn:
        await events_until(conn, "session.created")
        await conn.conversation.item.create(item=user_item("The code word is PEAR."))
        await events_until(conn, "conversation.item.done")
        own = {"input": [user_item("Summarise: nothing happened.")]}
        await conn.response.create(response=own)  # type: ignore[arg-type]
        answered = await events_until(conn, "response.done")
        await conn.response.create()
        await events_until(conn, "response.done")
    # The input was this response's whole context ...
    assert "PEAR" not in prompt_of(engine, 0)
    # ... and its output (not its input) joined the conversation, announced as such.
    added = [e for e in answered if e["type"] == "conversation.item.added"]
    assert [e["item"]["role"] for e in added] == ["assistant"]
    assert "PEAR" in prompt_of(engine, 1)
    assert "Noted." in prompt_of(engine, 1)
    assert "Summarise" not in prompt_of(engine, 1)
