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
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from oai_server.store.interface import StoredItem
from oai_server.store.tables import images

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


def externalize(new: Sequence[StoredItem]) -> tuple[list[StoredItem], dict[str, bytes]]:
    """`new` with each `data:` image URL replaced by its reference, and the bytes by hash."""
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

    out = [replace(item, body=_walk(item.body, visit)) for item in new]
    return out, found


def referenced(stored: Iterable[StoredItem]) -> set[str]:
    """The hashes the items' references name."""
    found: set[str] = set()

    def visit(url: str) -> str:
        if url.startswith(PREFIX):
            found.add(url[len(PREFIX) :].split(":", 1)[0])
        return url

    for item in stored:
        _walk(item.body, visit)
    return found


def inflate(stored: Sequence[StoredItem], found: Mapping[str, bytes]) -> list[StoredItem]:
    """`stored` with each reference turned back into the `data:` URL it stands for."""

    def visit(url: str) -> str:
        if not url.startswith(PREFIX):
            return url
        digest, _size, header = url[len(PREFIX) :].split(":", 2)
        data = found.get(digest)
        if data is None:
            return url
        return f"{header},{base64.b64encode(data).decode()}"

    return [replace(item, body=_walk(item.body, visit)) for item in stored]


async def write(conn: AsyncConnection, found: Mapping[str, bytes]) -> None:
    """Each image's bytes, unless a row already holds them (another turn's, another
    writer's at the same moment: the conflict is no error)."""
    if not found:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    now = time.time_ns() // 1000
    rows = [
        {"sha256": digest, "bytes": len(data), "created_at": now, "content": data}
        for digest, data in found.items()
    ]
    await conn.execute(dialect.insert(images).on_conflict_do_nothing(), rows)


async def inflated(conn: AsyncConnection, stored: Sequence[StoredItem]) -> list[StoredItem]:
    """`stored` with the images they refer to put back (one query for all of them)."""
    wanted = referenced(stored)
    if not wanted:
        return list(stored)
    query = select(images.c.sha256, images.c.content).where(images.c.sha256.in_(wanted))
    return inflate(stored, {row.sha256: row.content for row in await conn.execute(query)})
