"""SQL for lists: keyset pagination in (created_at, id) order, filters on indexed columns."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Select, and_, exists, or_, select

from oai_server.store.interface import ListQuery
from oai_server.store.tables import metadata_pairs, objects


def _after(
    created: ColumnElement[int], ident: ColumnElement[str], cursor: tuple[int, str], asc: bool
) -> ColumnElement[bool]:
    at, cursor_id = cursor
    if asc:
        return or_(created > at, and_(created == at, ident > cursor_id))
    return or_(created < at, and_(created == at, ident < cursor_id))


def list_objects(
    kind: str, owner: str, query: ListQuery, cursor: tuple[int, str] | None
) -> Select[tuple[str]]:
    """Ids of one page (plus one, to tell `has_more`), in the query's order.

    With a metadata filter the first pair drives the query from `store_metadata`'s index,
    which holds the matches already sorted; further pairs and the model are checked per row.
    """
    asc = query.order == "asc"
    pairs = list(query.metadata.items())
    if pairs:
        first_key, first_value = pairs[0]
        created, ident = metadata_pairs.c.created_at, metadata_pairs.c.object_id
        stmt = select(ident).where(
            metadata_pairs.c.kind == kind,
            metadata_pairs.c.owner == owner,
            metadata_pairs.c.key == first_key,
            metadata_pairs.c.value == first_value,
        )
        if query.model is not None:
            stmt = stmt.where(exists().where(objects.c.id == ident, objects.c.model == query.model))
    else:
        created, ident = objects.c.created_at, objects.c.id
        stmt = select(ident).where(objects.c.kind == kind, objects.c.owner == owner)
        if query.model is not None:
            stmt = stmt.where(objects.c.model == query.model)
    for key, value in pairs[1:]:
        other = metadata_pairs.alias()
        stmt = stmt.where(
            exists().where(other.c.object_id == ident, other.c.key == key, other.c.value == value)
        )
    if cursor is not None:
        stmt = stmt.where(_after(created, ident, cursor, asc))
    ordering = (created.asc(), ident.asc()) if asc else (created.desc(), ident.desc())
    return stmt.order_by(*ordering).limit(query.limit + 1)
