"""The Batch API's rows on the store's database: files, batches, finished lines, leases.

Every write is one transaction. A finished line is one row keyed by (batch, position),
written at most once (a second write of the same line is ignored), so a batch's progress
is exactly the lines it has, whichever replica wrote them and however often it restarted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from oai_server.store.files import file_content
from oai_server.store.interface import CursorNotFoundError, ListQuery, Page
from oai_server.store.tables import batch_lines, batches, files

# Batches a runner still has to work on.
ACTIVE = ("validating", "in_progress", "finalizing", "cancelling")


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class StoredFile:
    id: str
    owner: str
    purpose: str
    filename: str
    bytes: int
    created_at: int  # microseconds


@dataclass(frozen=True)
class Line:
    """A finished input line: its output line (`failed`: an error file line)."""

    position: int
    failed: bool
    body: dict[str, Any]


_FILE_COLUMNS = (
    files.c.id,
    files.c.owner,
    files.c.purpose,
    files.c.filename,
    files.c.bytes,
    files.c.created_at,
)


class BatchRecords:
    """Files and batches on one SQLAlchemy async engine (the store's)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    # --- files ---------------------------------------------------------------

    async def put_file(self, file: StoredFile, content: bytes) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(insert(files).values(**vars(file), content=content))

    async def file(self, file_id: str, owner: str | None) -> StoredFile | None:
        """The file, if `owner` may see it (None: any owner, for the runner)."""
        query = select(*_FILE_COLUMNS).where(files.c.id == file_id)
        if owner is not None:
            query = query.where(files.c.owner == owner)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else StoredFile(**row._mapping)

    async def content(self, file_id: str, owner: str | None) -> bytes | None:
        return await file_content(self.engine, file_id, owner)

    async def delete_file(self, file_id: str, owner: str) -> bool:
        async with self.engine.begin() as conn:
            done = await conn.execute(
                delete(files).where(files.c.id == file_id, files.c.owner == owner)
            )
        return bool(done.rowcount)

    async def files(self, owner: str, query: ListQuery, purpose: str | None) -> Page[StoredFile]:
        where = [files.c.owner == owner]
        if purpose is not None:
            where.append(files.c.purpose == purpose)
        rows = await self._page(files, where, query, _FILE_COLUMNS, "file")
        return Page(
            [StoredFile(**row._mapping) for row in rows[: query.limit]], len(rows) > query.limit
        )

    # --- batches -------------------------------------------------------------

    async def put_batch(
        self, batch_id: str, owner: str, created_at: int, body: dict[str, Any]
    ) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(batches).values(
                    id=batch_id,
                    owner=owner,
                    created_at=created_at,
                    status=body["status"],
                    body=body,
                )
            )

    async def batch(self, batch_id: str, owner: str | None) -> dict[str, Any] | None:
        query = select(batches.c.body).where(batches.c.id == batch_id)
        if owner is not None:
            query = query.where(batches.c.owner == owner)
        async with self.engine.connect() as conn:
            body: dict[str, Any] | None = (await conn.execute(query)).scalar()
        return body

    async def owner(self, batch_id: str) -> str | None:
        """Whose batch it is: "" without keys, None when there is no such batch."""
        query = select(batches.c.owner).where(batches.c.id == batch_id)
        async with self.engine.connect() as conn:
            owner: str | None = (await conn.execute(query)).scalar()
        return owner

    async def batches(
        self, owner: str, query: ListQuery, id_prefix: str | None = None
    ) -> Page[dict[str, Any]]:
        """One page of `owner`'s batches (only those whose id starts with `id_prefix`)."""
        where = [batches.c.owner == owner]
        if id_prefix is not None:
            where.append(batches.c.id.startswith(id_prefix, autoescape=True))
        rows = await self._page(batches, where, query, (batches.c.body,), "batch")
        return Page([row.body for row in rows[: query.limit]], len(rows) > query.limit)

    async def delete_batch(self, batch_id: str, owner: str) -> None:
        """Delete an ended batch of `owner`, with its input, output and error files."""
        async with self.engine.begin() as conn:
            body = (
                await conn.execute(
                    select(batches.c.body).where(batches.c.id == batch_id, batches.c.owner == owner)
                )
            ).scalar()
            if body is None:
                return
            ids = [body.get(k) for k in ("input_file_id", "output_file_id", "error_file_id")]
            await conn.execute(delete(files).where(files.c.id.in_([i for i in ids if i])))
            await conn.execute(delete(batch_lines).where(batch_lines.c.batch_id == batch_id))
            await conn.execute(delete(batches).where(batches.c.id == batch_id))

    async def set_batch(
        self,
        batch_id: str,
        body: dict[str, Any],
        *,
        runner: str | None = None,
        only_from: Sequence[str] = (),
    ) -> bool:
        """Write `body` (and its status); with `only_from`, only if the status is one of them,
        with `runner`, only while that runner holds the batch. Whether it was written."""
        query = update(batches).where(batches.c.id == batch_id)
        if only_from:
            query = query.where(batches.c.status.in_(only_from))
        if runner is not None:
            query = query.where(batches.c.runner == runner)
        async with self.engine.begin() as conn:
            done = await conn.execute(query.values(status=body["status"], body=body))
        return bool(done.rowcount)

    async def finish(
        self,
        batch_id: str,
        runner: str,
        body: dict[str, Any],
        produced: Sequence[tuple[StoredFile, bytes]],
    ) -> bool:
        """Write the output and error files and the batch's final state in one transaction,
        if `runner` still holds it; the lines are dropped (the files hold them now).
        The files belong to the batch's owner."""
        async with self.engine.begin() as conn:
            owner = (
                await conn.execute(select(batches.c.owner).where(batches.c.id == batch_id))
            ).scalar()
            done = await conn.execute(
                update(batches)
                .where(batches.c.id == batch_id, batches.c.runner == runner)
                .values(status=body["status"], body=body, runner=None, lease_until=None)
            )
            if not done.rowcount:
                await conn.rollback()
                return False
            for file, content in produced:
                await conn.execute(
                    insert(files).values(**{**vars(file), "owner": owner}, content=content)
                )
            await conn.execute(delete(batch_lines).where(batch_lines.c.batch_id == batch_id))
        return True

    # --- running -------------------------------------------------------------

    async def claim(self, runner: str, lease_us: int) -> list[str]:
        """The active batches this runner now holds: its own, and those whose runner's
        lease ran out (a replica that died), each taken in one conditional update."""
        now = now_us()
        free = or_(
            batches.c.runner.is_(None), batches.c.lease_until < now, batches.c.runner == runner
        )
        async with self.engine.connect() as conn:
            candidates = list(
                (
                    await conn.execute(
                        select(batches.c.id)
                        .where(batches.c.status.in_(ACTIVE), free)
                        .order_by(batches.c.created_at, batches.c.id)
                    )
                ).scalars()
            )
        held = []
        for batch_id in candidates:
            async with self.engine.begin() as conn:
                done = await conn.execute(
                    update(batches)
                    .where(batches.c.id == batch_id, batches.c.status.in_(ACTIVE), free)
                    .values(runner=runner, lease_until=now + lease_us)
                )
            if done.rowcount:
                held.append(batch_id)
        return held

    async def renew(self, batch_id: str, runner: str, lease_us: int) -> bool:
        """Extend this runner's lease; False if another runner took the batch."""
        async with self.engine.begin() as conn:
            done = await conn.execute(
                update(batches)
                .where(batches.c.id == batch_id, batches.c.runner == runner)
                .values(lease_until=now_us() + lease_us)
            )
        return bool(done.rowcount)

    async def release(self, batch_id: str, runner: str) -> None:
        """Let another runner (or this one, restarted) take the batch at once."""
        async with self.engine.begin() as conn:
            await conn.execute(
                update(batches)
                .where(batches.c.id == batch_id, batches.c.runner == runner)
                .values(runner=None, lease_until=None)
            )

    async def add_line(self, batch_id: str, line: Line) -> None:
        """Record a finished line once; a line already there is kept as it is."""
        values = {
            "batch_id": batch_id,
            "position": line.position,
            "failed": line.failed,
            "body": line.body,
        }
        async with self.engine.begin() as conn:
            dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
            await conn.execute(
                dialect.insert(batch_lines).values(**values).on_conflict_do_nothing()
            )

    async def lines(self, batch_id: str) -> list[Line]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(batch_lines.c.position, batch_lines.c.failed, batch_lines.c.body)
                .where(batch_lines.c.batch_id == batch_id)
                .order_by(batch_lines.c.position)
            )
            return [Line(row.position, row.failed, row.body) for row in rows]

    async def counts(self, batch_id: str) -> tuple[int, int]:
        """(completed, failed) lines so far."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(batch_lines.c.failed, func.count())
                .where(batch_lines.c.batch_id == batch_id)
                .group_by(batch_lines.c.failed)
            )
            by_kind = {bool(failed): count for failed, count in rows}
        return by_kind.get(False, 0), by_kind.get(True, 0)

    # --- lists ---------------------------------------------------------------

    async def _page(
        self, table: Any, where: list[Any], query: ListQuery, columns: Any, what: str
    ) -> list[Any]:
        """One page (and one row more, to tell `has_more`) ordered by (created_at, id)."""
        key = tuple_(table.c.created_at, table.c.id)
        async with self.engine.connect() as conn:
            if query.after is not None:
                cursor = (
                    await conn.execute(
                        select(table.c.created_at).where(table.c.id == query.after, *where)
                    )
                ).scalar()
                if cursor is None:
                    raise CursorNotFoundError(query.after, what)
                mark = tuple_(cursor, query.after)
                where = [*where, key > mark if query.order == "asc" else key < mark]
            order = (table.c.created_at, table.c.id)
            ordered = order if query.order == "asc" else tuple(c.desc() for c in order)
            rows = await conn.execute(
                select(*columns).where(and_(*where)).order_by(*ordered).limit(query.limit + 1)
            )
            return list(rows)
