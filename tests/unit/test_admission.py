"""The admission step: what a request passes before any engine sees it. A request over the
caller's token limit is refused before the engine gets it, and before it displaces any
batch line; one that passes makes room first; once the drain has cut the requests in
flight, nothing new reaches the engine."""

from __future__ import annotations

import asyncio

import pytest

from oai_server.admission import Admission
from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.types import SamplingOptions
from oai_server.errors import RateLimitError, ServerShuttingDownError
from oai_server.observability.context import RequestRecord, current_request
from oai_server.settings import Settings
from oai_server.state import ServerState
from tests.unit.conftest import MODEL, chat_body, serve


async def test_a_request_over_the_token_limit_never_reaches_the_engine() -> None:
    engine = FakeEngine()
    async with serve(engine, rate_limit_tpm=100, rate_limit_window=1e9) as client:
        refused = await client.post("/v1/chat/completions", json=chat_body(max_tokens=200))
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limit_exceeded"
        assert engine.calls == []
        admitted = await client.post("/v1/chat/completions", json=chat_body(max_tokens=10))
        assert admitted.status_code == 200
        assert len(engine.calls) == 1


class Recorded:
    """A reservation and a hand-back that write what they were asked, in order."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.log: list[str] = []

    async def reserve(self, record: RequestRecord | None, tokens: int) -> None:
        if tokens > self.limit:
            self.log.append(f"refused {tokens}")
            raise RateLimitError("over the limit")
        self.log.append(f"reserved {tokens}")

    async def make_room(self) -> None:
        self.log.append("room made")


async def test_the_tokens_are_reserved_before_the_batch_lines_are_handed_back() -> None:
    recorded = Recorded(limit=100)
    admission = Admission(recorded.reserve, recorded.make_room)
    await admission.admit(None, 60)
    assert recorded.log == ["reserved 60", "room made"]
    with pytest.raises(RateLimitError):
        await admission.admit(None, 160)
    # A refused request displaces no batch line.
    assert recorded.log == ["reserved 60", "room made", "refused 160"]


async def test_a_pooling_request_is_reserved_and_counted_on_its_record() -> None:
    recorded = Recorded(limit=100)
    admission = Admission(recorded.reserve, recorded.make_room)
    record = RequestRecord("req-1")
    token = current_request.set(record)
    try:
        await admission.admit_pooling(12, "embedder")
        with pytest.raises(RateLimitError):
            await admission.admit_pooling(500, "embedder")
    finally:
        current_request.reset(token)
    # The embedding engine is not the chat engine: no batch line leaves for it.
    assert recorded.log == ["reserved 12", "refused 500"]
    assert (record.prompt_tokens, record.model) == (12, "embedder")


async def test_after_the_drain_cuts_the_requests_in_flight_no_new_one_reaches_the_engine() -> None:
    engine = FakeEngine(token_delay=0.05)
    app = create_app(Settings(drain_timeout=0.1), engine)
    state: ServerState = app.state.server
    options = SamplingOptions(model=MODEL, max_tokens=200)
    async with app.router.lifespan_context(app):
        await engine.start()
        state.lifecycle.enter()  # a request in flight, which the drain waits for

        async def in_flight() -> None:
            try:
                async for _ in state.engine.generate("slow", [1, 2, 3], options):
                    pass
            finally:
                state.lifecycle.leave()

        slow = asyncio.create_task(in_flight())
        await asyncio.sleep(0.1)
        await state.lifecycle.drain()
        with pytest.raises(ServerShuttingDownError):
            await slow  # cut by the drain
        with pytest.raises(ServerShuttingDownError):
            await state.engine.submit("late", [1, 2, 3], options)
    assert [call.request_id for call in engine.calls] == ["slow"]
