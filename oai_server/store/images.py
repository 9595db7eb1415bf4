"""Images in stored records: their bytes kept once, each record holding a reference.

A conversation sends its images again on every turn (a chat client re-sends its whole
history; each stored completion keeps its request's messages), so a `data:` URL of
megabytes stored as it came would be one more copy per turn. Before items are written,
each `data:` image URL in them becomes a reference that names the bytes by their
SHA-256 and size (`oai-image:<sha256>:<bytes>:<header>`), and the bytes go to the
`store_images` table once, under that hash. Reading an item puts the `data:` URL back,
so a client reads what it sent (the spec's `image_url` is "a fully qualified URL or a
base64 encoded image in a data URL") and a later turn built from stored items sends the
engine the same bytes (the same hash: its caches know the image). `write` and
`inflated` are the two steps on a connection of the SQL store.

An image belongs to the items stored with it, not to its hash: each item's images are
rows of `store_image_refs`, and reading an item puts back only the images it was stored
with. A reference a client writes by hand (`oai-image:<hash>...` as an image URL, someone
else's hash or an unknown one) is stored and read back as the text it is: holding a hash
gives no bytes, and the answer is the same whether the bytes are stored or not. The bytes
go with the last item that refers to them (`forget`: an object or item deleted, or
removed by retention).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, exists, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from oai_server.store.interface import StoredItem
from oai_server.store.tables import image_refs, images

PREFIX = "oai-image:"
# Where an image URL sits in a stored item: a chat `image_url.url`, a Responses
# `input_image.image_url`.
_KEYS = ("url", "image_url")


def _split(url: str) -> tuple[str, bytes] | None:
    """A base64 `data:` URL's header and bytes; None for anything else (left as it is)."""
    header, sep, payload = url.partition(",")
    if not sep or not header.endswith(";base64"):
        return None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    # Only what comes back byte for byte: the reference must restore what was sent.
    return (header, data) if base64.b64encode(data).decode() == payload else None


def _walk(value: Any, visit: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: visit(v) if k in _KEYS and isinstance(v, str) else _walk(v, visit)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_walk(v, visit) for v in value]
    return value


# The images one stored item holds: its parent object's id, its own id, and the bytes
# by hash.
Held = tuple[str, str, dict[str, bytes]]


def externalize(parent_id: str, new: Sequence[StoredItem]) -> tuple[list[StoredItem], list[Held]]:
    """`new` with each `data:` image URL replaced by its reference, and each item's images."""
    held: list[Held] = []

    def one(item: StoredItem) -> StoredItem:
        found: dict[str, bytes] = {}

        def visit(url: str) -> str:
            if not url.startswith("data:"):
                return url
            split = _split(url)
            if split is None:
                return url
            header, data = split
            digest = hashlib.sha256(data).hexdigest()
            found[digest] = data
            return f"{PREFIX}{digest}:{len(data)}:{header}"

        kept = replace(item, body=_walk(item.body, visit))
        if found:
            held.append((parent_id, item.id, found))
        return kept

    return [one(item) for item in new], held


def inflate(
    stored: Sequence[StoredItem], found: Mapping[str, Mapping[str, bytes]]
) -> list[StoredItem]:
    """`stored` with each reference turned back into the `data:` URL it stands for, from
    the images each item holds (`found`, by item id)."""

    def one(item: StoredItem) -> StoredItem:
        own = found.get(item.id, {})

        def visit(url: str) -> str:
            if not url.startswith(PREFIX):
                return url
            digest, _size, header = url[len(PREFIX) :].split(":", 2)
            data = own.get(digest)
            if data is None:
                return url
            return f"{header},{base64.b64encode(data).decode()}"

        return replace(item, body=_walk(item.body, visit))

    return [one(item) for item in stored]


async def write(conn: AsyncConnection, held: Sequence[Held]) -> None:
    """Each image's bytes, unless a row already holds them (another item's, another
    writer's at the same moment: the conflict is no error), and each item's references.

    A row that holds them is touched, not skipped: that locks it until this transaction
    ends, so a `forget` of its last other reference (which locks it too) either ends
    first, its delete then undone by this insert, or waits and sees this reference."""
    if not held:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    now = time.time_ns() // 1000
    rows = {
        digest: {"sha256": digest, "bytes": len(data), "created_at": now, "content": data}
        for _, _, found in held
        for digest, data in found.items()
    }
    insert = dialect.insert(images)
    touch = insert.on_conflict_do_update(
        index_elements=[images.c.sha256], set_={"created_at": insert.excluded.created_at}
    )
    await conn.execute(touch, list(rows.values()))
    refs = [
        {"parent_id": parent_id, "item_id": item_id, "sha256": digest}
        for parent_id, item_id, found in held
        for digest in found
    ]
    await conn.execute(dialect.insert(image_refs).on_conflict_do_nothing(), refs)


async def inflated(
    conn: AsyncConnection, stored: Sequence[tuple[str, StoredItem]]
) -> list[StoredItem]:
    """The items (each with its parent object's id) with the images they hold put back."""
    if not any(PREFIX in str(item.body) for _, item in stored):
        return [item for _, item in stored]
    wanted = {(parent_id, item.id) for parent_id, item in stored}
    parents = {parent_id for parent_id, _ in stored}
    query = select(image_refs).where(image_refs.c.parent_id.in_(parents))
    refs = [r for r in await conn.execute(query) if (r.parent_id, r.item_id) in wanted]
    digests = {r.sha256 for r in refs}
    query = select(images.c.sha256, images.c.content).where(images.c.sha256.in_(digests))
    content = {row.sha256: row.content for row in await conn.execute(query)}
    found: dict[str, dict[str, bytes]] = {}
    for r in refs:
        if r.sha256 in content:
            found.setdefault(r.item_id, {})[r.sha256] = content[r.sha256]
    return inflate([item for _, item in stored], found)


async def forget(
    conn: AsyncConnection, parent_ids: Sequence[str], item_id: str | None = None
) -> None:
    """Drop the references of the objects' items (of one item, when `item_id` is given),
    and the bytes of each image no item refers to any more."""
    where: ColumnElement[bool] = image_refs.c.parent_id.in_(parent_ids)
    if item_id is not None:
        where = and_(where, image_refs.c.item_id == item_id)
    digests = set((await conn.execute(select(image_refs.c.sha256).where(where))).scalars())
    if not digests:
        return
    await conn.execute(delete(image_refs).where(where))
    # Locked first (see `write`); SQLite has one writer at a time and no such lock.
    await conn.execute(
        select(images.c.sha256).where(images.c.sha256.in_(digests)).with_for_update()
    )
    still = exists().where(image_refs.c.sha256 == images.c.sha256)
    await conn.execute(delete(images).where(images.c.sha256.in_(digests), ~still))
