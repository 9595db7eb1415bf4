"""The replica that served a turn, kept with the stored response and conversation, on SQLite
and PostgreSQL: a gateway that never saw the previous turn (restarted, or one of several)
reads it back and sends the next turn to the same replica's prefix cache."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.ray_serve.affinity import ResponseReplicas, RouteHint
from oai_server.ray_serve.recorded import LOOKUP_TIMEOUT_S, RouteHints
from oai_server.settings import Settings
from oai_server.store.sql import SQLStore
from oai_server.store.url import async_url
from tests.conformance import AsyncValidatingTransport
from tests.live import serve_async
from tests.store.conftest import MODEL


async def _serve_turns(store_url: str, replica: str, **turn: Any) -> dict[str, Any]:
    """One response created on an app that runs as `replica`; returns it once it is stored
    (the app's shutdown drains its queued writes)."""
    app = create_app(Settings(store_url=store_url), FakeEngine(), replica=replica)
    async with (
        serve_async(app) as base,
        httpx.AsyncClient(transport=AsyncValidatingTransport(), base_url=base) as http,
    ):
        if turn.get("conversation") == "new":
            created = await http.post("/v1/conversations", json={})
            turn["conversation"] = created.json()["id"]
        body = {"model": MODEL, "input": "Hello?", "max_output_tokens": 4, **turn}
        response = await http.post("/v1/responses", json=body)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer


def _body(**fields: Any) -> bytes:
    return json.dumps({"model": MODEL, "input": "And then?", **fields}).encode()


async def test_a_gateway_that_never_saw_a_turn_finds_its_replica_in_the_store(
    store_url: str,
) -> None:
    first = await _serve_turns(store_url, "replica-a")
    chat = await _serve_turns(store_url, "replica-a", conversation="new")
    conversation = chat["conversation"]["id"]
    # The conversation's next turn ran elsewhere (load spilled it): that replica now holds it.
    await _serve_turns(store_url, "replica-b", conversation=conversation)

    store = SQLStore(async_url(store_url, Path()))
    hints = RouteHints(ResponseReplicas(), store)  # a fresh gateway: nothing learned
    by_response = await hints.hint(_body(previous_response_id=first["id"]))
    assert by_response == RouteHint(key=None, replica="replica-a")
    by_conversation = await hints.hint(_body(conversation=conversation))
    assert by_conversation == RouteHint(key=f"conversation:{conversation}", replica="replica-b")
    assert (await hints.hint(_body(previous_response_id="resp_unknown"))).replica is None
    await store.close()


async def test_a_store_that_cannot_answer_costs_only_the_hint() -> None:
    # A database that takes the connection and never answers: the lookup's deadline ends it.
    # (Not a SQLite file: its connection runs in a thread that a starved machine may run only
    # after this test's event loop has closed, an error in the next test's name.)
    held: list[asyncio.StreamWriter] = []
    hung = await asyncio.start_server(lambda _r, w: held.append(w), "127.0.0.1", 0)
    port = hung.sockets[0].getsockname()[1]
    store = SQLStore(async_url(f"postgresql://user@127.0.0.1:{port}/store", Path()))
    hints = RouteHints(ResponseReplicas(), store)
    began = time.monotonic()
    hint = await hints.hint(_body(previous_response_id="resp_1"))
    assert hint == RouteHint(key=None, replica=None)
    assert time.monotonic() - began < LOOKUP_TIMEOUT_S + 1
    assert held, "the lookup never reached the database"
    await store.close()
    for writer in held:
        writer.close()
    hung.close()
