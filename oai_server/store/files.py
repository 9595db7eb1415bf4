"""Reading an uploaded file's bytes: for the Batch API's input files, and for the images a
Responses request names by `file_id` (the files are rows on the store's database)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from oai_server.store.tables import files


async def file_content(database: AsyncEngine, file_id: str, owner: str | None) -> bytes | None:
    """The bytes of `file_id`, if `owner` may see it (None: any owner, for the runner)."""
    query = select(files.c.content).where(files.c.id == file_id)
    if owner is not None:
        query = query.where(files.c.owner == owner)
    async with database.connect() as conn:
        found: bytes | None = (await conn.execute(query)).scalar()
    return found
