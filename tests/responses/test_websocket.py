"""Responses WebSocket mode (`WS /v1/responses`), through the official SDK's socket client.

A real uvicorn with the fake engine; every server event is checked against the spec's
`ResponsesServerEvent`, so an error event has the spec's `ResponseWsError` shape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.conformance import validate
from tests.live import serve_async
from tests.responses.conftest import CALL, WEATHER, prompt_of, weather_reply

MODEL = "smollm2-135m-instruct"
LAST = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
TIMEOUT_S = 30.0


@asynccontextmanager
async def server(engine: FakeEngine, **settings: Any) -> AsyncIterator[str]:
    async with serve_async(create_app(Settings(**settings), engine)) as root:
        yield root


def client_for(root: str, api_key: str = "unused") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{root}/v1", api_key=api_key, max_retries=0)


async def turn(conn: Any, **body: Any) -> list[dict[str, Any]]:
    """Send one `response.create`; its events up to the last, each checked against the spec."""
    await conn.send({"type": "response.create", "model": MODEL, **body})
    return await until_last(conn)


async def until_last(conn: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            event = json.loads(await conn.recv_bytes())
            validate("ResponsesServerEvent", event)
            seen.append(event)
            if event["type"] in LAST:
                return seen


def final(events: list[dict[str, Any]]) -> dict[str, Any]:
    response: dict[str, Any] = events[-1]["response"]
    return response


def error_code(events: list[dict[str, Any]]) -> str | None:
    code: str | None = events[-1]["error"]["code"] if events[-1]["type"] == "error" else None
    return code


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


def template_file(tmp_path: Path) -> Path:
    from tests.responses.conftest import TEMPLATE

    path = tmp_path / "template.jinja"
    path.write_text(TEMPLATE)
    return path


async def test_a_store_false_chain_continues_on_the_socket(tmp_path: Path) -> None:
    engine = FakeEngine(reply_for=weather_reply)
    async with (
        server(engine, chat_template=template_file(tmp_path)) as root,
        client_for(root).responses.connect() as conn,
    ):
        first = await turn(conn, store=False, input="Weather in Paris?", tools=[WEATHER])
        call = final(first)["output"][0]
        assert call["type"] == "function_call"
        second = await turn(
            conn,
            store=False,
            previous_response_id=final(first)["id"],
            input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "sun"}],
            tools=[WEATHER],
        )
    assert text_of(second) == "It is sunny in Paris."
    assert final(second)["previous_response_id"] == final(first)["id"]
    # The second prompt was rebuilt from the socket: the question, the call, its output.
    prompt = prompt_of(engine)
    assert "Weather in Paris?" in prompt
    assert "sun[for " + call["call_id"] in prompt
    assert CALL not in prompt  # the call is written back as a call, not as text


async def test_turns_are_answered_one_at_a_time_in_order() -> None:
    engine = FakeEngine(reply="one two three four", token_delay=0.01)
    async with server(engine) as root, client_for(root).responses.connect() as conn:
        for word in ("first", "second", "third"):
            await conn.send({"type": "response.create", "model": MODEL, "input": word})
        events = [*await until_last(conn), *await until_last(conn), *await until_last(conn)]
    kinds = [e["type"] for e in events]
    created = [i for i, kind in enumerate(kinds) if kind == "response.created"]
    completed = [i for i, kind in enumerate(kinds) if kind == "response.completed"]
    # Each response ends before the next one starts, and they come in the order sent.
    assert created[1] > completed[0]
    assert created[2] > completed[1]
    assert [
        bytes(c.prompt_token_ids).decode().count(w)
        for c, w in zip(engine.calls, ("first", "second", "third"), strict=True)
    ] == [1, 1, 1]


async def test_only_the_latest_response_is_kept() -> None:
    async with server(FakeEngine()) as root, client_for(root).responses.connect() as conn:
        first = await turn(conn, store=False, input="one")
        await turn(conn, store=False, input="two", previous_response_id=final(first)["id"])
        older = await turn(
            conn, store=False, input="three", previous_response_id=final(first)["id"]
        )
    assert error_code(older) == "previous_response_not_found"
    assert older[-1]["status"] == 400
    assert older[-1]["error"]["param"] == "previous_response_id"


async def test_a_failed_continuation_forgets_its_previous_response() -> None:
    async with server(FakeEngine()) as root, client_for(root).responses.connect() as conn:
        first = await turn(conn, store=False, input="Remember: ember.")
        previous = final(first)["id"]
        orphan = {"type": "function_call_output", "call_id": "call_none", "output": "x"}
        failed = await turn(conn, store=False, previous_response_id=previous, input=[orphan])
        retry = await turn(conn, store=False, previous_response_id=previous, input="Again?")
        fresh = await turn(conn, store=False, input="Start over.")
    assert failed[-1]["type"] == "error"
    assert failed[-1]["error"]["param"] == "input"
    assert "call_none" in failed[-1]["error"]["message"]
    assert error_code(retry) == "previous_response_not_found"
    assert final(fresh)["status"] == "completed"  # the socket is still open and serving


async def test_a_reconnect_loses_store_false_responses_but_not_stored_ones(
    tmp_path: Path,
) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    async with server(FakeEngine(), store_url=store_url) as root:
        client = client_for(root)
        async with client.responses.connect() as conn:
            unstored = final(await turn(conn, store=False, input="one"))["id"]
            stored = final(await turn(conn, store=True, input="two"))["id"]
        async with client.responses.connect() as conn:
            lost = await turn(conn, store=False, previous_response_id=unstored, input="x")
            kept = await turn(conn, store=False, previous_response_id=stored, input="y")
    assert error_code(lost) == "previous_response_not_found"
    assert final(kept)["status"] == "completed"


async def test_generate_false_prefills_the_prompt_and_answers_nothing() -> None:
    engine = FakeEngine(reply="Bonjour.", prefix_cache=True)
    instructions = "You answer in French. " * 20
    async with server(engine) as root, client_for(root).responses.connect() as conn:
        warm = await turn(
            conn, store=False, generate=False, instructions=instructions, input="Salut."
        )
        answer = await turn(
            conn,
            store=False,
            instructions=instructions,
            previous_response_id=final(warm)["id"],
            input="Ça va ?",
        )
    assert [e["type"] for e in warm] == ["response.created", "response.completed"]
    assert final(warm)["output"] == []
    assert final(warm)["usage"]["output_tokens"] == 0
    assert engine.calls[0].options.max_tokens == 1  # prefilled, one token dropped
    assert text_of(answer) == "Bonjour."
    assert "Salut." in prompt_of(engine)  # the warmed input is part of the chain
    # The answer's prompt starts with the warmed one: a prefix-cache hit.
    assert final(answer)["usage"]["input_tokens_details"]["cached_tokens"] > 0


async def test_refused_events_get_error_events_and_the_socket_stays_open() -> None:
    async with server(FakeEngine()) as root, client_for(root).responses.connect() as conn:
        await conn.send_raw("not json")
        bad_json = await until_last(conn)
        await conn.send_raw(json.dumps({"type": "response.cancel"}))
        bad_type = await until_last(conn)
        background = await turn(conn, background=True, input="x")
        unknown_model = await turn(conn, input="x", model="no-such-model")
        fine = await turn(conn, input="x")
    assert bad_json[-1]["error"]["code"] == "invalid_json"
    assert bad_type[-1]["error"]["param"] == "type"
    assert background[-1]["error"]["param"] == "background"
    assert unknown_model[-1]["status"] == 404
    assert all("sequence_number" not in e[-1] for e in (bad_json, bad_type, background))
    assert final(fine)["status"] == "completed"


async def test_a_lane_s_events_echo_its_stream_id() -> None:
    async with server(FakeEngine()) as root, client_for(root).responses.connect() as conn:
        events = await turn(conn, input="x", stream_id="agent_1")
    assert {e["stream_id"] for e in events} == {"agent_1"}


async def test_a_socket_without_a_key_is_refused_at_the_handshake() -> None:
    async with server(FakeEngine(), api_key=["sk-good"]) as root:
        with pytest.raises(InvalidStatus) as refused:
            async with client_for(root, "sk-bad").responses.connect():
                pass
        async with client_for(root, "sk-good").responses.connect() as conn:
            served = await turn(conn, input="x")
    assert refused.value.response.status_code == 401
    assert final(served)["status"] == "completed"


async def test_a_socket_closed_mid_answer_aborts_the_engine_request() -> None:
    engine = FakeEngine(reply="word " * 500, token_delay=0.02)
    async with server(engine) as root:
        url = root.replace("http", "ws", 1) + "/v1/responses"
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": "x"}))
            while json.loads(await ws.recv())["type"] != "response.output_text.delta":
                pass
        async with asyncio.timeout(TIMEOUT_S):
            while not engine.aborted:  # noqa: ASYNC110 - the fake engine has no event
                await asyncio.sleep(0.01)
    assert engine.aborted == [engine.calls[0].request_id]


async def test_an_event_over_the_size_limit_closes_the_socket() -> None:
    async with server(FakeEngine(), max_request_bytes=4096) as root:
        url = root.replace("http", "ws", 1) + "/v1/responses"
        async with websockets.connect(url) as ws:
            body = {"type": "response.create", "model": MODEL, "input": "x" * 5000}
            await ws.send(json.dumps(body))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1009


async def test_an_unexpected_failure_is_a_500_event_that_names_no_internals() -> None:
    engine = FakeEngine(fail_at_step=0, fault=RuntimeError("/srv/secret/path exploded"))
    async with server(engine) as root, client_for(root).responses.connect() as conn:
        failed = await turn(conn, input="x")
        await conn.send_raw("not json")
        after = await until_last(conn)
    assert failed[-1]["type"] == "error"
    assert failed[-1]["status"] == 500
    assert "secret" not in json.dumps(failed[-1])
    assert after[-1]["error"]["code"] == "invalid_json"  # the socket still serves


async def test_each_turn_counts_against_the_request_limit() -> None:
    async with server(FakeEngine(), rate_limit_rpm=3) as root:
        async with client_for(root).responses.connect() as conn:
            # The handshake counts as the first turn's request; each later turn, one more.
            served = [await turn(conn, input=f"turn {i}") for i in range(3)]
            refused = await turn(conn, input="one too many")
            await conn.send_raw("not json")
            after = await until_last(conn)
        with pytest.raises(InvalidStatus) as handshake:
            async with client_for(root).responses.connect():
                pass
    assert [final(events)["status"] for events in served] == ["completed"] * 3
    assert refused[-1]["type"] == "error"
    assert refused[-1]["status"] == 429
    assert "Rate limit reached on requests" in refused[-1]["error"]["message"]
    assert after[-1]["error"]["code"] == "invalid_json"  # the socket stays open
    assert handshake.value.response.status_code == 429


async def test_a_socket_past_its_lifetime_is_told_and_closed() -> None:
    engine = FakeEngine(reply="one two three", token_delay=0.2)
    async with server(engine, responses_ws_max_lifetime=0.3) as root:
        url = root.replace("http", "ws", 1) + "/v1/responses"
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": "x"}))
            events = await until_closed(ws)
    kinds = [event["type"] for event in events]
    # The answer in progress at the end of the lifetime ends first.
    assert kinds[-2:] == ["response.completed", "error"]
    assert events[-1]["error"]["code"] == "websocket_connection_limit_reached"
    assert ws.close_code == 1000


async def until_closed(ws: Any) -> list[dict[str, Any]]:
    """Every event until the server closes the socket."""
    events = []
    async with asyncio.timeout(TIMEOUT_S):
        async for message in ws:
            events.append(json.loads(message))
    return events
