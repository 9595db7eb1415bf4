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

from sqlalchemy import ColumnElement, Table, case, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from oai_server.store.tables import batches, files, metadata_pairs, objects, usage

logger = logging.getLogger(__name__)

# Every column that names a key by its id (the Batch API's and the usage tables included,
# since their schema is the store's), with the leading column of its table's primary key.
OWNER_COLUMNS: tuple[tuple[Table, str, str], ...] = (
    (objects, "id", "owner"),
    (metadata_pairs, "object_id", "owner"),
    (files, "id", "owner"),
    (batches, "id", "owner"),
    (usage, "id", "api_key_id"),
)
# Rows per statement, walked in primary-key order: every statement stays well within the
# driver's deadline (`sql.COMMAND_TIMEOUT_S`) however large the table, and each row is
# visited once (a filter on the owner alone would rescan what it moved: no index leads
# with it).
BATCH = 10_000
# Renames per statement: two bound parameters each (the CASE and the IN), well within
# SQLite's and asyncpg's limits on parameters per statement.
CHUNK = 500


async def _move(
    conn: AsyncConnection,
    table: Table,
    owner: str,
    where: list[ColumnElement[bool]],
    renames: list[tuple[str, str]],
) -> int:
    column = table.c[owner]
    moved = 0
    for start in range(0, len(renames), CHUNK):
        chunk = dict(renames[start : start + CHUNK])
        statement = (
            update(table)
            .where(*where, column.in_(list(chunk)))
            .values({owner: case(chunk, value=column)})
        )
        moved += (await conn.execute(statement)).rowcount
    return moved


async def _carry_table(
    engine: AsyncEngine, table: Table, by: str, owner: str, renames: list[tuple[str, str]]
) -> int:
    """`table`'s rows of former ids moved, a range of `BATCH` rows (by `by`) per
    transaction: one cut short leaves the rest for the next run."""
    key = table.c[by]
    moved = 0
    last = None
    while True:
        after: list[ColumnElement[bool]] = [] if last is None else [key > last]
        async with engine.begin() as conn:
            bound = (
                await conn.execute(
                    select(key).where(*after).order_by(key).offset(BATCH - 1).limit(1)
                )
            ).scalar()
            upto = [] if bound is None else [key <= bound]
            moved += await _move(conn, table, owner, [*after, *upto], renames)
        if bound is None:
            return moved
        last = bound


async def carry_over(engine: AsyncEngine, renames: Mapping[str, str]) -> int:
    """Rename every former id of `renames` to its id now, in each owner column; the
    number of rows moved."""
    pairs = [(old, new) for old, new in renames.items() if old != new]
    if not pairs:
        return 0
    moved = {
        table.name: await _carry_table(engine, table, by, owner, pairs)
        for table, by, owner in OWNER_COLUMNS
    }
    total = sum(moved.values())
    logger.info(
        "API keys' ids from before the server secret: %d rows carried over to their ids now (%s)",
        total,
        ", ".join(f"{table} {count}" for table, count in moved.items()),
    )
    return total
