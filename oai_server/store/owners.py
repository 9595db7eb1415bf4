"""API-key ids renamed in place: what a key owns, carried over when its id changes.

Releases before the server secret named a key `key-` and 12 hex digits of its plain
SHA-256; the id is now keyed with the secret (`oai_server.auth.keys`). Every row recorded
under a configured key's former id (its stored objects and their metadata, its files and
batches, its usage) is moved to its id now, at each start, once the schema is in place:
a key added back later is carried over too, and a second run, or another replica's,
finds nothing left to move. The server knows only the keys it is given, so a key no
longer configured keeps its rows under the old id until it is configured again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sqlalchemy import Table, case, update
from sqlalchemy.ext.asyncio import AsyncEngine

from oai_server.store.tables import batches, files, metadata_pairs, objects, usage

logger = logging.getLogger(__name__)

# Every column that names a key by its id; the Batch API's and the usage tables included,
# since their schema is the store's.
OWNER_COLUMNS: tuple[tuple[Table, str], ...] = (
    (objects, "owner"),
    (metadata_pairs, "owner"),
    (files, "owner"),
    (batches, "owner"),
    (usage, "api_key_id"),
)
# Renames per statement: two bound parameters each (the CASE and the IN), well within
# SQLite's and asyncpg's limits on parameters per statement.
CHUNK = 500


async def carry_over(engine: AsyncEngine, renames: Mapping[str, str]) -> int:
    """Rename every former id of `renames` to its id now, in each owner column (one
    transaction per table); the number of rows moved."""
    pairs = [(old, new) for old, new in renames.items() if old != new]
    if not pairs:
        return 0
    moved: dict[str, int] = {}
    for table, name in OWNER_COLUMNS:
        column = table.c[name]
        async with engine.begin() as conn:
            for start in range(0, len(pairs), CHUNK):
                chunk = dict(pairs[start : start + CHUNK])
                # One scan of the table per chunk, not one per key.
                statement = (
                    update(table)
                    .where(column.in_(list(chunk)))
                    .values({name: case(chunk, value=column)})
                )
                result = await conn.execute(statement)
                moved[table.name] = moved.get(table.name, 0) + result.rowcount
    total = sum(moved.values())
    logger.info(
        "API keys' ids from before the server secret: %d rows carried over to their ids now (%s)",
        total,
        ", ".join(f"{table} {count}" for table, count in moved.items()),
    )
    return total
