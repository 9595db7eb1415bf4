"""Bad input keeps the session: raw frames through `websockets`, where the SDK cannot send them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from oai_server.engine.fake import FakeEngine
from tests.realtime.conftest import MODEL, checked, realtime_server


@asynccontextmanager
async def raw_session(
    engine: FakeEngine, *, subprotocols: list[str] | None = None, **settings: Any
) -> AsyncIterator[ClientConnection]:
    async with realtime_server(engine, **settings) as root:
        url = root.replace("http://", "ws://") + f"/v1/realtime?model={MODEL}"
        async with websockets.connect(url, subprotocols=subprotocols) as ws:  # type: ignore[arg-type]
            assert checked(await ws.recv())["type"] == "session.created"
            yield ws


async def next_of(ws: ClientConnection, kind: str) -> dict[str, Any]:
    while True:
        event = checked(await ws.recv())
        if event["type"] == kind:
            return event


async def still_serves(ws: ClientConnection) -> None:
    await ws.send(json.dumps({"type": "session.update", "session": {"instructions": "ok"}}))
    assert (await next_of(ws, "session.updated"))["session"]["instructions"] == "ok"


@pytest.mark.parametrize(
    ("frame", "code", "param"),
    [
        ("{not json", "invalid_json", None),
        ('{"type": "no.such.event", "event_id": "evt_1"}', "invalid_value", "type"),
        ("[1, 2]", None, "type"),
        (
            '{"type": "conversation.item.create", "event_id": "evt_1",'
            ' "item": {"type": "message", "role": "robot", "content": []}}',
            "invalid_value",
            None,
        ),
        (
            '{"type": "session.update", "event_id": "evt_1", "session": {"max_output_tokens": -3}}',
            "invalid_value",
            "session.max_output_tokens",
        ),
        (
            '{"type": "conversation.item.create", "event_id": "evt_1", "item": {"type":'
            ' "message", "role": "user", "content": [{"type": "input_audio", "audio": "AAA="}]}}',
            "unsupported_content_type",
            "item.content[0]",
        ),
        (
            '{"type": "input_audio_buffer.append", "event_id": "evt_1", "audio": "AA=="}',
            None,
            "type",
        ),
        ('{"type": "response.cancel", "event_id": "evt_1"}', "response_cancel_not_active", None),
        ('{"type": "conversation.item.delete", "event_id": "evt_1", "item_id": "x"}', None, None),
    ],
)
async def test_bad_input_gets_one_error_and_the_session_goes_on(
    frame: str, code: str | None, param: str | None
) -> None:
    async with raw_session(FakeEngine()) as ws:
        await ws.send(frame)
        error = (await next_of(ws, "error"))["error"]
        assert error["message"]
        if code is not None:
            assert error["code"] == code
        if param is not None:
            assert error["param"] == param
        if "evt_1" in frame:
            assert error["event_id"] == "evt_1"
        await still_serves(ws)


async def test_a_second_response_while_one_runs_is_refused() -> None:
    async with raw_session(FakeEngine(reply="word " * 200, token_delay=0.01)) as ws:
        await ws.send(json.dumps({"type": "response.create"}))
        await next_of(ws, "response.created")
        await ws.send(json.dumps({"type": "response.create", "event_id": "evt_2"}))
        error = (await next_of(ws, "error"))["error"]
        assert error["code"] == "conversation_already_has_active_response"
        assert error["event_id"] == "evt_2"
        await ws.send(json.dumps({"type": "response.cancel"}))
        assert (await next_of(ws, "response.done"))["response"]["status"] == "cancelled"


async def test_audio_is_refused_and_the_text_settings_still_apply() -> None:
    async with raw_session(FakeEngine()) as ws:
        update = {
            "type": "session.update",
            "event_id": "evt_a",
            "session": {"instructions": "Be kind.", "output_modalities": ["audio"]},
        }
        await ws.send(json.dumps(update))
        updated = await next_of(ws, "session.updated")
        assert updated["session"]["instructions"] == "Be kind."
        assert updated["session"]["output_modalities"] == ["text"]
        error = (await next_of(ws, "error"))["error"]
        assert "text only" in error["message"]
        assert error["event_id"] == "evt_a"
        await still_serves(ws)


async def test_an_oversized_frame_closes_with_1009() -> None:
    async with raw_session(FakeEngine(), max_request_bytes=10_000) as ws:
        big = {"type": "session.update", "session": {"instructions": "x" * 20_000}}
        await ws.send(json.dumps(big))
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1009


async def test_an_idle_session_times_out() -> None:
    async with raw_session(FakeEngine(), realtime_idle_timeout=0.3) as ws:
        error = (await next_of(ws, "error"))["error"]
        assert error["code"] == "session_idle_timeout"
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1000


async def test_the_realtime_subprotocol_is_accepted() -> None:
    async with raw_session(FakeEngine(), subprotocols=["realtime"]) as ws:
        assert ws.subprotocol == "realtime"


async def test_an_unknown_model_closes_the_socket() -> None:
    async with realtime_server(FakeEngine()) as root:
        url = root.replace("http://", "ws://") + "/v1/realtime?model=gpt-nope"
        async with websockets.connect(url) as ws:
            error = checked(await ws.recv())["error"]
            assert error["code"] == "model_not_found"
            with pytest.raises(ConnectionClosed):
                await ws.recv()
