"""The store on SQLAlchemy's async engine: SQLite (aiosqlite) or PostgreSQL (asyncpg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, event, func, insert, literal, select, text, update
from sqlalchemy.engine import URL, Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from oai_server.store import images as stored_images
from oai_server.store import migrate, owners, queries
from oai_server.store.interface import (
    CursorNotFoundError,
    ListQuery,
    Page,
    Record,
    StoredItem,
    StoredObject,
)
from oai_server.store.tables import items, metadata_pairs, objects
from oai_server.store.url import ensure_directory

# The driver's own deadlines (the breaker's are shorter for reads): a database that
# accepts connections but never answers must not hold a pool connection for minutes.
CONNECT_TIMEOUT_S = 2
COMMAND_TIMEOUT_S = 5
POOL_TIMEOUT_S = 2  # waiting for a free connection of the pool
MAX_LINEAGE = 10_000  # ancestors followed at most


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL: readers never wait for the writer; NORMAL: no fsync per commit (WAL stays safe).
    cursor = dbapi_connection.cursor()
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=5000"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def create_engine(url: URL) -> AsyncEngine:
    if url.get_backend_name() == "sqlite":
        if url.database in (None, "", ":memory:"):
            # One connection holds the whole in-memory database. SQLAlchemy's default pool
            # for it (StaticPool) lends that connection to every caller at once, so two
            # transactions interleave on it and one's rollback loses the other's writes: a
            # queue of one connection lends it to one transaction at a time.
            engine = create_async_engine(
                url, poolclass=AsyncAdaptedQueuePool, pool_size=1, max_overflow=0
            )
        else:
            engine = create_async_engine(url)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    # pre_ping: connections from before a database restart are replaced, not failed on.
    return create_async_engine(
        url,
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=10,
        pool_timeout=POOL_TIMEOUT_S,
        connect_args={"timeout": CONNECT_TIMEOUT_S, "command_timeout": COMMAND_TIMEOUT_S},
    )


def _object(row: Row[Any]) -> StoredObject:
    return StoredObject(
        id=row.id,
        kind=row.kind,
        owner=row.owner,
        created_at=row.created_at,
        body=row.body,
        model=row.model,
        metadata=row.meta,
        request=row.request,
        status=row.status,
        parent_id=row.parent_id,
        replica=row.replica,
    )


def _item(row: Row[Any]) -> StoredItem:
    return StoredItem(id=row.id, kind=row.kind, body=row.body, section=row.section)


def _item_rows(parent_id: str, start: int, new: Sequence[StoredItem]) -> list[dict[str, Any]]:
    return [
        {
            "parent_id": parent_id,
            "position": start + i,
            "id": item.id,
            "section": item.section,
            "kind": item.kind,
            "body": item.body,
        }
        for i, item in enumerate(new)
    ]


def _metadata_rows(obj: StoredObject, metadata: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "object_id": obj.id,
            "key": key,
            "value": value,
            "kind": obj.kind,
            "owner": obj.owner,
            "created_at": obj.created_at,
        }
        for key, value in metadata.items()
    ]


class SQLStore:
    """`Store` on one SQLAlchemy async engine (a connection pool; no blocking I/O on the loop)."""

    def __init__(self, url: URL, renames: Mapping[str, str] | None = None) -> None:
        """`renames`: each configured API key's former id and its id now, carried over
        (`oai_server.store.owners`) when the schema is migrated."""
        self.url = url
        self.engine = create_engine(url)
        self.renames = dict(renames or {})

    async def migrate(self) -> None:
        ensure_directory(self.url)
        await migrate.upgrade(self.engine)
        await owners.carry_over(self.engine, self.renames)

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def put(self, records: Sequence[Record]) -> None:
        if not records:
            return
        async with self.engine.begin() as conn:
            ids = [r.object.id for r in records]
            present = set(
                (await conn.execute(select(objects.c.id).where(objects.c.id.in_(ids)))).scalars()
            )
            fresh = {r.object.id: r for r in records if r.object.id not in present}
            if not fresh:
                return
            await conn.execute(
                insert(objects), [self._object_row(r.object) for r in fresh.values()]
            )
            held: list[stored_images.Held] = []
            item_rows = []
            for r in fresh.values():
                kept, named = stored_images.externalize(r.object.id, r.items)
                held += named
                item_rows += _item_rows(r.object.id, 0, kept)
            await stored_images.write(conn, held)
            if item_rows:
                await conn.execute(insert(items), item_rows)
            pairs = [
                row for r in fresh.values() for row in _metadata_rows(r.object, r.object.metadata)
            ]
            if pairs:
                await conn.execute(insert(metadata_pairs), pairs)

    @staticmethod
    def _object_row(obj: StoredObject) -> dict[str, Any]:
        return {
            "id": obj.id,
            "kind": obj.kind,
            "owner": obj.owner,
            "model": obj.model,
            "created_at": obj.created_at,
            "status": obj.status,
            "parent_id": obj.parent_id,
            "replica": obj.replica,
            "meta": dict(obj.metadata),
            "request": obj.request,
            "body": obj.body,
        }

    @staticmethod
    async def _get(
        conn: AsyncConnection, kind: str, object_id: str, owner: str
    ) -> StoredObject | None:
        row = (
            await conn.execute(
                select(objects).where(
                    objects.c.id == object_id, objects.c.kind == kind, objects.c.owner == owner
                )
            )
        ).first()
        return None if row is None else _object(row)

    async def get(self, kind: str, object_id: str, owner: str) -> StoredObject | None:
        async with self.engine.connect() as conn:
            return await self._get(conn, kind, object_id, owner)

    async def list(self, kind: str, owner: str, query: ListQuery) -> Page[StoredObject]:
        async with self.engine.connect() as conn:
            cursor = None
            if query.after is not None:
                after = await self._get(conn, kind, query.after, owner)
                if after is None:
                    raise CursorNotFoundError(query.after, "object")
                cursor = (after.created_at, after.id)
            ids = list(
                (await conn.execute(queries.list_objects(kind, owner, query, cursor))).scalars()
            )
            page_ids = ids[: query.limit]
            rows = (await conn.execute(select(objects).where(objects.c.id.in_(page_ids)))).all()
        found = {row.id: _object(row) for row in rows}
        return Page([found[i] for i in page_ids if i in found], has_more=len(ids) > query.limit)

    async def update(
        self,
        kind: str,
        object_id: str,
        owner: str,
        *,
        metadata: Mapping[str, str] | None = None,
        body: dict[str, Any] | None = None,
        status: str | None = None,
    ) -> StoredObject | None:
        async with self.engine.begin() as conn:
            obj = await self._get(conn, kind, object_id, owner)
            if obj is None:
                return None
            values: dict[str, Any] = {}
            if metadata is not None:
                values["meta"] = dict(metadata)
                await conn.execute(
                    delete(metadata_pairs).where(metadata_pairs.c.object_id == object_id)
                )
                if metadata:
                    await conn.execute(insert(metadata_pairs), _metadata_rows(obj, metadata))
            if body is not None:
                values["body"] = body
            if status is not None:
                values["status"] = status
            if values:
                await conn.execute(update(objects).where(objects.c.id == object_id).values(values))
            return await self._get(conn, kind, object_id, owner)

    async def delete(self, kind: str, object_id: str, owner: str) -> bool:
        async with self.engine.begin() as conn:
            gone = await conn.execute(
                delete(objects).where(
                    objects.c.id == object_id, objects.c.kind == kind, objects.c.owner == owner
                )
            )
            if not gone.rowcount:
                return False
            await self._delete_children(conn, [object_id])
            return True

    @staticmethod
    async def _delete_children(conn: AsyncConnection, object_ids: Sequence[str]) -> None:
        await conn.execute(delete(items).where(items.c.parent_id.in_(object_ids)))
        await conn.execute(delete(metadata_pairs).where(metadata_pairs.c.object_id.in_(object_ids)))
        await stored_images.forget(conn, object_ids)

    async def list_items(
        self, kind: str, parent_id: str, owner: str, query: ListQuery
    ) -> Page[StoredItem] | None:
        async with self.engine.connect() as conn:
            if await self._get(conn, kind, parent_id, owner) is None:
                return None
            stmt = select(items).where(items.c.parent_id == parent_id)
            if query.section is not None:
                stmt = stmt.where(items.c.section == query.section)
            asc = query.order == "asc"
            if query.after is not None:
                at = (
                    await conn.execute(
                        select(items.c.position).where(
                            items.c.parent_id == parent_id, items.c.id == query.after
                        )
                    )
                ).scalar()
                if at is None:
                    raise CursorNotFoundError(query.after, "item")
                stmt = stmt.where(items.c.position > at if asc else items.c.position < at)
            position = items.c.position.asc() if asc else items.c.position.desc()
            rows = (await conn.execute(stmt.order_by(position).limit(query.limit + 1))).all()
            page = await stored_images.inflated(
                conn, [(parent_id, _item(r)) for r in rows[: query.limit]]
            )
        return Page(page, has_more=len(rows) > query.limit)

    async def append_items(
        self,
        kind: str,
        parent_id: str,
        owner: str,
        new: Sequence[StoredItem],
        *,
        replica: str | None = None,
    ) -> bool:
        async with self.engine.begin() as conn:
            if await self._get(conn, kind, parent_id, owner) is None:
                return False
            last = (
                await conn.execute(
                    select(func.max(items.c.position)).where(items.c.parent_id == parent_id)
                )
            ).scalar()
            if new:
                start = -1 if last is None else int(last)
                kept, held = stored_images.externalize(parent_id, new)
                await stored_images.write(conn, held)
                await conn.execute(insert(items), _item_rows(parent_id, start + 1, kept))
            if replica is not None:
                where = objects.c.id == parent_id
                await conn.execute(update(objects).where(where).values(replica=replica))
            return True

    async def lineage_items(
        self, kind: str, object_id: str, owner: str
    ) -> Sequence[StoredItem] | None:
        # One recursive query walks the chain, one more reads every item of it: a deep
        # chain (a long `previous_response_id` thread) costs two round trips, not two per turn.
        start = (
            select(objects.c.id, objects.c.parent_id, literal(0).label("depth"))
            .where(objects.c.id == object_id, objects.c.kind == kind, objects.c.owner == owner)
            .cte("lineage", recursive=True)
        )
        chain = start.union_all(
            select(objects.c.id, objects.c.parent_id, (start.c.depth + 1).label("depth")).where(
                objects.c.id == start.c.parent_id,
                objects.c.kind == kind,
                objects.c.owner == owner,
                start.c.depth < MAX_LINEAGE,
            )
        )
        async with self.engine.connect() as conn:
            depths = {row.id: row.depth for row in await conn.execute(select(chain))}
            if object_id not in depths:
                return None
            rows = (await conn.execute(select(items).where(items.c.parent_id.in_([*depths])))).all()
            ordered = sorted(rows, key=lambda r: (-depths[r.parent_id], r.position))
            return await stored_images.inflated(conn, [(r.parent_id, _item(r)) for r in ordered])

    async def get_item(
        self, kind: str, parent_id: str, owner: str, item_id: str
    ) -> StoredItem | None:
        async with self.engine.connect() as conn:
            if await self._get(conn, kind, parent_id, owner) is None:
                return None
            row = (
                await conn.execute(
                    select(items).where(items.c.parent_id == parent_id, items.c.id == item_id)
                )
            ).first()
            if row is None:
                return None
            return (await stored_images.inflated(conn, [(parent_id, _item(row))]))[0]

    async def delete_item(self, kind: str, parent_id: str, owner: str, item_id: str) -> bool:
        async with self.engine.begin() as conn:
            if await self._get(conn, kind, parent_id, owner) is None:
                return False
            gone = await conn.execute(
                delete(items).where(items.c.parent_id == parent_id, items.c.id == item_id)
            )
            await stored_images.forget(conn, [parent_id], item_id)
            return bool(gone.rowcount)

    async def replica_of(self, object_id: str) -> str | None:
        # One primary-key read: the affinity gateway asks on the hot path.
        async with self.engine.connect() as conn:
            found = await conn.execute(select(objects.c.replica).where(objects.c.id == object_id))
            replica: str | None = found.scalar()
            return replica

    async def delete_before(self, created_at: int) -> int:
        async with self.engine.begin() as conn:
            ids = list(
                (
                    await conn.execute(
                        select(objects.c.id).where(objects.c.created_at < created_at)
                    )
                ).scalars()
            )
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                await conn.execute(delete(objects).where(objects.c.id.in_(chunk)))
                await self._delete_children(conn, chunk)
            return len(ids)

    async def close(self) -> None:
        await self.engine.dispose()
