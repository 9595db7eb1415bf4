"""Schema versions: every revision's data survives the upgrade to the newest; retention."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from prometheus_client import CollectorRegistry
from sqlalchemy import Connection, text

from oai_server.store import migrate
from oai_server.store.interface import ListQuery, Record, StoredObject
from oai_server.store.metrics import StoreMetrics
from oai_server.store.service import StoreService
from oai_server.store.sql import SQLStore
from oai_server.store.tables import metadata
from oai_server.store.url import async_url, ensure_directory


def _seed_0001(conn: Connection) -> None:
    """A chat completion as revision 0001 wrote it."""
    conn.execute(
        text(
            "INSERT INTO store_objects (id, kind, owner, model, created_at, meta, body) "
            "VALUES ('chatcmpl-old', 'chat.completion', '', 'm', 1, :meta, :body)"
        ),
        {"meta": '{"era": "0001"}', "body": '{"id": "chatcmpl-old", "object": "chat.completion"}'},
    )
    conn.execute(
        text(
            "INSERT INTO store_items (parent_id, position, id, section, kind, body) "
            "VALUES ('chatcmpl-old', 0, 'chatcmpl-old-0', 'input', 'message', :body)"
        ),
        {"body": '{"role": "user", "content": "from 0001"}'},
    )
    conn.execute(
        text(
            "INSERT INTO store_metadata (object_id, key, value, kind, owner, created_at) "
            "VALUES ('chatcmpl-old', 'era', '0001', 'chat.completion', '', 1)"
        )
    )


def _seed_0002(conn: Connection) -> None:
    """0001's completion, and a batch file and batch as revision 0002 wrote them."""
    _seed_0001(conn)
    conn.execute(
        text(
            "INSERT INTO files (id, owner, purpose, filename, bytes, created_at, content) "
            "VALUES ('file-old', '', 'batch', 'in.jsonl', 2, 1, :content)"
        ),
        {"content": b"{}"},
    )
    conn.execute(
        text(
            "INSERT INTO batches (id, owner, created_at, status, body) "
            "VALUES ('batch_old', '', 1, 'in_progress', :body)"
        ),
        {"body": '{"id": "batch_old", "status": "in_progress"}'},
    )


def _seed_0003(conn: Connection) -> None:
    """0002's rows, the completion marked with the Ray Serve replica that served it."""
    _seed_0002(conn)
    conn.execute(text("UPDATE store_objects SET replica = 'replica-old' WHERE id = 'chatcmpl-old'"))


def _seed_0004(conn: Connection) -> None:
    """0003's rows, and a minute of one key's usage."""
    _seed_0003(conn)
    conn.execute(
        text(
            "INSERT INTO usage (kind, start_time, api_key_id, model, service_tier, batch, "
            "input_tokens, input_cached_tokens, output_tokens, num_model_requests) "
            "VALUES ('completions', 60, 'key-old', 'm', 'default', false, 5, 0, 7, 1)"
        )
    )


def _seed_0005(conn: Connection) -> None:
    """0004's rows, one stored image's bytes and a completion's item referring to them,
    and the bytes of an image whose completion was deleted (no item refers to them)."""
    _seed_0004(conn)
    for digest, content in (("ab" * 32, b"old"), ("cd" * 32, b"gone")):
        conn.execute(
            text(
                "INSERT INTO store_images (sha256, bytes, created_at, content) "
                "VALUES (:digest, :bytes, 1, :content)"
            ),
            {"digest": digest, "bytes": len(content), "content": content},
        )
    conn.execute(
        text(
            "INSERT INTO store_objects (id, kind, owner, model, created_at, meta, body) "
            "VALUES ('chatcmpl-image', 'chat.completion', '', 'm', 2, '{}', '{}')"
        )
    )
    part = {
        "type": "image_url",
        "image_url": {"url": f"oai-image:{'ab' * 32}:3:data:image/png;base64"},
    }
    conn.execute(
        text(
            "INSERT INTO store_items (parent_id, position, id, section, kind, body) "
            "VALUES ('chatcmpl-image', 0, 'chatcmpl-image-0', 'input', 'message', :body)"
        ),
        {"body": json.dumps({"role": "user", "content": [part]})},
    )


def _seed_0006(conn: Connection) -> None:
    """0005's rows as revision 0006 leaves them: the image's reference recorded, the
    bytes no item refers to dropped."""
    _seed_0005(conn)
    conn.execute(text("DELETE FROM store_images WHERE sha256 = :digest"), {"digest": "cd" * 32})
    conn.execute(
        text(
            "INSERT INTO store_image_refs (parent_id, item_id, sha256) "
            "VALUES ('chatcmpl-image', 'chatcmpl-image-0', :digest)"
        ),
        {"digest": "ab" * 32},
    )


_VERSION = {"version_table": migrate.VERSION_TABLE}

# One seed per revision: a new revision must say what data it must carry forward.
SEEDS: dict[str, Callable[[Connection], None]] = {
    "0001": _seed_0001,
    "0002": _seed_0002,
    "0003": _seed_0003,
    "0004": _seed_0004,
    "0005": _seed_0005,
    "0006": _seed_0006,
}


def test_every_revision_has_a_seed() -> None:
    assert migrate.revisions() == list(SEEDS)


@pytest.mark.parametrize("revision", list(SEEDS))
async def test_data_written_at_a_revision_survives_the_upgrade(
    revision: str, store_url: str
) -> None:
    store = SQLStore(async_url(store_url, Path()))
    await _upgrade_to(store, revision)
    async with store.engine.begin() as conn:
        await conn.run_sync(SEEDS[revision])
    await store.migrate()  # what the server does at start-up

    old = await store.get("chat.completion", "chatcmpl-old", "")
    assert old is not None
    assert old.metadata == {"era": "0001"}
    page = await store.list("chat.completion", "", ListQuery(metadata={"era": "0001"}))
    assert [o.id for o in page.data] == ["chatcmpl-old"]
    items = await store.list_items("chat.completion", "chatcmpl-old", "", ListQuery())
    assert items is not None
    assert [i.body["content"] for i in items.data] == ["from 0001"]
    # Rows from before the replica was recorded have none: their turns route by key.
    assert await store.replica_of("chatcmpl-old") == ("replica-old" if revision >= "0003" else None)
    async with store.engine.connect() as conn:
        used = (await conn.execute(text("SELECT sum(output_tokens) FROM usage"))).scalar()
    assert used == (7 if revision >= "0004" else None)
    async with store.engine.connect() as conn:
        kept = (await conn.execute(text("SELECT sum(bytes) FROM store_images"))).scalar()
    # The image an item refers to is kept, and read back in it; the other is dropped.
    assert kept == (3 if revision >= "0005" else None)
    if revision >= "0005":
        found = await store.get_item("chat.completion", "chatcmpl-image", "", "chatcmpl-image-0")
        assert found is not None
        assert found.body["content"][0]["image_url"]["url"] == "data:image/png;base64,b2xk"
    await store.close()


async def _upgrade_to(store: SQLStore, revision: str) -> None:
    ensure_directory(store.url)
    await migrate.upgrade(store.engine, revision)


async def test_migrations_build_exactly_the_schema_the_code_uses(store_url: str) -> None:
    store = SQLStore(async_url(store_url, Path()))
    await store.migrate()

    def differences(conn: Connection) -> list[object]:
        return list(compare_metadata(MigrationContext.configure(conn, opts=_VERSION), metadata))

    async with store.engine.connect() as conn:
        assert await conn.run_sync(differences) == []
    await store.close()


async def test_retention_deletes_what_is_older_than_the_period(store_url: str) -> None:
    store = SQLStore(async_url(store_url, Path()))
    await store.migrate()
    now = time.time_ns() // 1000
    day = 86_400 * 1_000_000
    for name, age_days in (("old", 3), ("new", 1)):
        obj = StoredObject(
            id=name, kind="chat.completion", owner="", created_at=now - age_days * day,
            body={}, metadata={"k": "v"},
        )  # fmt: skip
        await store.put([Record(obj)])
    service = StoreService(store, StoreMetrics(CollectorRegistry()), retention_days=2)
    assert await service.purge_expired() == 1
    page = await store.list("chat.completion", "", ListQuery(metadata={"k": "v"}))
    assert [o.id for o in page.data] == ["new"]
    await store.close()
