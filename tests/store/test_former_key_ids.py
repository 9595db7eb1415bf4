"""The upgrade from releases whose API-key ids were a plain SHA-256 of the key: what a key
stored and used under its former id is its own still once a server with that key starts,
on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import create_async_engine

from oai_server.store import owners
from oai_server.store.url import async_url
from tests.batch.helpers import chat_line, upload, wait
from tests.keys import former_key_id, served_key_id
from tests.live import serve
from tests.store.conftest import MODEL, make_app, sdk
from tests.store.test_usage import admin

ADMIN, ALICE, BOB = "sk-admin", "sk-alice", "sk-bob"
# Every column that named a key by its id in those releases, listed here rather than taken
# from the server: a table the server forgets leaves its rows under the former id.
OWNER_COLUMNS = {
    "store_objects": "owner",
    "store_metadata": "owner",
    "files": "owner",
    "batches": "owner",
    "usage": "api_key_id",
}


def server(store_url: str) -> Any:
    return make_app(store_url, api_key=[ALICE, BOB], admin_api_key=[ADMIN])


async def _rows_under(store_url: str, renames: dict[str, str]) -> dict[str, int]:
    """Rewrite each key's id to its former one in every owner column, as those releases
    left the database; how many rows each table then holds under former ids."""
    engine = create_async_engine(async_url(store_url, Path()))
    counts = {}
    try:
        async with engine.begin() as conn:
            for table, column in OWNER_COLUMNS.items():
                for new, old in renames.items():
                    await conn.execute(
                        text(f"UPDATE {table} SET {column} = :old WHERE {column} = :new"),
                        {"old": old, "new": new},
                    )
                query = text(f"SELECT count(*) FROM {table} WHERE {column} IN :olds")
                query = query.bindparams(bindparam("olds", expanding=True))
                olds = list(renames.values())
                counts[table] = (await conn.execute(query, {"olds": olds})).scalar_one()
    finally:
        await engine.dispose()
    return counts


def _use(client: openai.OpenAI) -> dict[str, str]:
    """One of every stored thing, by Alice; their ids by kind."""
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Remember me"}],
        store=True,
        metadata={"topic": "upgrade"},
    )
    response = client.responses.create(model=MODEL, input="Remember me too", store=True)
    conversation = client.conversations.create(items=[{"role": "user", "content": "Hello"}])
    batch = client.batches.create(
        input_file_id=upload(client, [chat_line("one", "Batched")]),
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    done = wait(client, batch.id)
    assert done.status == "completed"
    assert done.output_file_id is not None
    return {
        "completion": completion.id,
        "response": response.id,
        "conversation": conversation.id,
        "batch": batch.id,
        "file": done.output_file_id,
    }


def _usage(base: str, start: int) -> dict[str | None, tuple[int, int]]:
    """(input tokens, requests) by key id, as the Usage API says."""
    with admin(base) as client:
        page = client.admin.organization.usage.completions(
            start_time=start, group_by=["api_key_id"]
        )
    return {r.api_key_id: (r.input_tokens, r.num_model_requests) for r in page.data[0].results}


def _moved(caplog: pytest.LogCaptureFixture) -> list[int]:
    """The rows each start said it carried over."""
    return [
        int(str(r.args[0]))  # type: ignore[index]
        for r in caplog.records
        if r.name == "oai_server.store.owners" and r.levelno == logging.INFO
    ]


def test_what_a_key_stored_under_its_former_id_is_its_own(
    store_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ranges of two rows, so that the walk over each table crosses many of them.
    monkeypatch.setattr(owners, "BATCH", 2)
    caplog.set_level(logging.INFO, logger="oai_server.store.owners")
    start = int(time.time()) - 60
    with serve(server(store_url)) as base:
        with sdk(base, api_key=ALICE) as alice:
            ids = _use(alice)
        with sdk(base, api_key=BOB) as bob:
            bob.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Bob's"}], store=True
            )
    renames = {served_key_id(k): former_key_id(k) for k in (ALICE, BOB)}
    former = asyncio.run(_rows_under(store_url, renames))
    # Every table holds something of theirs under the former ids: the test checks each.
    assert all(former.values()), former
    caplog.clear()
    for _ in range(2):  # upgraded, then restarted: nothing left to move the second time
        with serve(server(store_url)) as base:
            with sdk(base, api_key=ALICE) as alice:
                stored = alice.chat.completions.retrieve(ids["completion"])
                assert stored.choices[0].message.content
                tagged = alice.chat.completions.list(metadata={"topic": "upgrade"})
                assert [c.id for c in tagged.data] == [ids["completion"]]
                assert alice.responses.retrieve(ids["response"]).status == "completed"
                assert alice.conversations.items.list(ids["conversation"]).data
                assert alice.batches.retrieve(ids["batch"]).status == "completed"
                assert alice.files.content(ids["file"]).text
            with sdk(base, api_key=BOB) as bob:
                assert len(bob.chat.completions.list().data) == 1
                with pytest.raises(openai.NotFoundError):
                    bob.chat.completions.retrieve(ids["completion"])
            usage = _usage(base, start)
            assert set(usage) == {served_key_id(ALICE), served_key_id(BOB)}
            assert all(tokens > 0 and requests > 0 for tokens, requests in usage.values())
    assert _moved(caplog) == [sum(former.values()), 0]
