"""Who sees what, what gets stored, and what is dropped."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from oai_server.engine.fake import FakeEngine
from tests.batch.helpers import chat_line, read_lines, upload, wait
from tests.conformance import AsyncValidatingTransport
from tests.live import serve, serve_async
from tests.store.conftest import KEYS, MODEL, ask, make_app, sdk


def test_a_key_sees_changes_and_deletes_only_what_it_stored(store_url: str) -> None:
    with (
        serve(make_app(store_url, api_key=KEYS)) as base,
        sdk(base, api_key="sk-alice") as alice,
        sdk(base, api_key="sk-bob") as bob,
    ):
        mine = ask(alice, "Alice's secret", store=True, metadata={"who": "alice"})
        theirs = ask(bob, "Bob's question", store=True, metadata={"who": "alice"})

        assert [c.id for c in bob.chat.completions.list()] == [theirs.id]
        assert [c.id for c in bob.chat.completions.list(metadata={"who": "alice"})] == [theirs.id]
        for call in (
            lambda: bob.chat.completions.retrieve(mine.id),
            lambda: bob.chat.completions.messages.list(mine.id),
            lambda: bob.chat.completions.update(mine.id, metadata={"who": "bob"}),
            lambda: bob.chat.completions.delete(mine.id),
        ):
            with pytest.raises(openai.NotFoundError):
                call()
        with pytest.raises(openai.BadRequestError):
            bob.chat.completions.list(after=mine.id)  # not even as a cursor

        assert [c.id for c in alice.chat.completions.list()] == [mine.id]
        assert alice.chat.completions.retrieve(mine.id).metadata == {"who": "alice"}


def test_store_all_keeps_every_completion_as_an_audit_log() -> None:
    with serve(make_app("sqlite:///:memory:", store_all=True)) as base, sdk(base) as client:
        quiet = ask(client, "Not asked to be kept", store=False)
        assert [c.id for c in client.chat.completions.list()] == [quiet.id]


def test_without_store_nothing_is_kept() -> None:
    with serve(make_app("sqlite:///:memory:")) as base, sdk(base) as client:
        ask(client)
        ask(client, stream=True)
        assert client.chat.completions.list().data == []


def test_an_in_memory_store_keeps_every_line_of_a_batch() -> None:
    # `sqlite:///:memory:` is one connection: lent to two transactions at once (SQLAlchemy's
    # StaticPool), one's rollback lost the other's write, here a batch's output line.
    for _ in range(3):
        with serve(make_app("sqlite:///:memory:")) as base, sdk(base) as client:
            lines = [chat_line(f"req-{i}", f"question {i}", model=MODEL) for i in range(3)]
            batch = client.batches.create(
                input_file_id=upload(client, lines),
                endpoint="/v1/chat/completions",
                completion_window="24h",
            )
            done = wait(client, batch.id)
            assert done.request_counts is not None
            assert done.request_counts.completed == 3
            assert done.output_file_id is not None
            output = read_lines(client, done.output_file_id)
            assert sorted(line["custom_id"] for line in output) == ["req-0", "req-1", "req-2"]


async def test_a_client_that_leaves_mid_stream_is_not_stored() -> None:
    engine = FakeEngine(tokens=["tick "] * 200, token_delay=0.01)
    app = make_app("sqlite:///:memory:", engine)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Count"}],
        "stream": True,
        "store": True,
        "max_tokens": 500,
    }
    async with (
        serve_async(app) as base,
        httpx.AsyncClient(transport=AsyncValidatingTransport(), base_url=base) as client,
    ):
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            async for _ in response.aiter_lines():
                break  # the first event, then the client goes away

        async def counted_incomplete() -> bool:
            return "oai_store_incomplete_total 1.0" in (await client.get("/metrics")).text

        # The store's decision is counted: once it is, nothing may have been written.
        async with asyncio.timeout(10):
            while not await counted_incomplete():  # noqa: ASYNC110 - a metric, no event
                await asyncio.sleep(0.01)
        assert engine.aborted
        listed = await client.get("/v1/chat/completions")
        assert listed.json()["data"] == []
