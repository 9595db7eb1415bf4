"""Usage rows on the store's database: per-minute tallies appended, buckets summed on read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, literal, select
from sqlalchemy.ext.asyncio import AsyncEngine

from oai_server.observability.usage import Slot, Tally
from oai_server.store.tables import usage
from oai_server.usage.params import UsageQuery

# The columns a query may group by; the others are null in its results.
_COLUMNS = {
    "api_key_id": usage.c.api_key_id,
    "model": usage.c.model,
    "batch": usage.c.batch,
    "service_tier": usage.c.service_tier,
}
_NO_VALUE = {"project_id", "user_id"}  # no projects or users here: always null


@dataclass(frozen=True)
class UsageTotal:
    """One group's sums in one bucket (`bucket`: its index from the query's start)."""

    bucket: int
    groups: Mapping[str, Any]
    input_tokens: int
    input_cached_tokens: int
    output_tokens: int
    num_model_requests: int


class UsageRecords:
    """The `usage` table on one SQLAlchemy async engine (the store's)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def add(self, tallies: Mapping[Slot, Tally]) -> None:
        """Append `tallies`, in one transaction."""
        rows = [
            {
                "kind": kind,
                "start_time": minute,
                "api_key_id": key,
                "model": model,
                "service_tier": tier,
                "batch": batch,
                "input_tokens": t.input_tokens,
                "input_cached_tokens": t.cached_tokens,
                "output_tokens": t.output_tokens,
                "num_model_requests": t.requests,
            }
            for (minute, (kind, key, model, tier, batch)), t in tallies.items()
        ]
        async with self.engine.begin() as connection:
            await connection.execute(insert(usage), rows)

    async def totals(self, query: UsageQuery) -> list[UsageTotal]:
        """The sums of the page's buckets, by the query's groups, oldest bucket first."""
        start, width = query.start_time, query.width
        page_start = start + query.first * width
        page_end = min(query.end_time, page_start + query.limit * width)
        bucket = ((usage.c.start_time - literal(start)) // literal(width)).label("bucket")
        grouped = [_COLUMNS[g].label(g) for g in query.group_by if g in _COLUMNS]
        statement = (
            select(
                bucket,
                *grouped,
                func.sum(usage.c.input_tokens).label("input_tokens"),
                func.sum(usage.c.input_cached_tokens).label("input_cached_tokens"),
                func.sum(usage.c.output_tokens).label("output_tokens"),
                func.sum(usage.c.num_model_requests).label("num_model_requests"),
            )
            .where(
                usage.c.kind == query.kind,
                usage.c.start_time >= page_start,
                usage.c.start_time < page_end,
            )
            .group_by(bucket, *grouped)
            .order_by(bucket, *grouped)
        )
        if query.api_key_ids:
            statement = statement.where(usage.c.api_key_id.in_(query.api_key_ids))
        if query.models:
            statement = statement.where(usage.c.model.in_(query.models))
        if query.batch is not None:
            statement = statement.where(usage.c.batch == query.batch)
        async with self.engine.connect() as connection:
            result = await connection.execute(statement)
            rows = result.all()
        return [
            UsageTotal(
                bucket=row.bucket,
                groups={g: getattr(row, g) for g in query.group_by if g not in _NO_VALUE},
                input_tokens=int(row.input_tokens),
                input_cached_tokens=int(row.input_cached_tokens),
                output_tokens=int(row.output_tokens),
                num_model_requests=int(row.num_model_requests),
            )
            for row in rows
        ]
