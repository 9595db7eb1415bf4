"""A Realtime session on a server of several chat models answers with the model it names
(`?model=` at connect, `session.model` later), each on its own engine."""

from __future__ import annotations

from typing import Any

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.router import EngineRouter
from oai_server.settings import Settings
from tests.live import serve_async
from tests.realtime.conftest import client_for, events_until

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


async def _answer(conn: Any) -> str:
    await conn.conversation.item.create(item=USER)
    await events_until(conn, "conversation.item.done")
    await conn.response.create()
    return _text(await events_until(conn, "response.done"))


async def test_a_session_answers_with_the_model_it_names() -> None:
    engines = {
        "first": FakeEngine(reply="I am the first model.", token_delay=0.001),
        "second": FakeEngine(reply="I am the second model.", token_delay=0.001),
    }
    settings = Settings(model=["first=org/first", "second=org/second"], embedding_model="none")
    async with (
        serve_async(create_app(settings, EngineRouter(engines))) as root,
        client_for(root).realtime.connect(model="second") as conn,
    ):
        created = await events_until(conn, "session.created")
        assert created[0]["session"]["model"] == "second"
        assert await _answer(conn) == "I am the second model."
        await conn.session.update(
            session={"type": "realtime", "model": "first", "output_modalities": ["text"]}
        )
        await events_until(conn, "session.updated")
        assert await _answer(conn) == "I am the first model."
    assert [len(engines["first"].calls), len(engines["second"].calls)] == [1, 1]
