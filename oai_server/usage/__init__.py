"""Usage per API key: OpenAI's Usage API for completions and embeddings, on the store.

Layout: `params` (the query's parameters), `records` (the `usage` table: tallies
appended, buckets summed), `writer` (the meter's tallies written off the request path),
`routes` (the two endpoints, admin keys only). The counting itself is the core's
(`oai_server.observability.usage`: every generation and embedding call, also with
`store: false`); `feature` stores it and answers for it.
"""

from __future__ import annotations

import asyncio

from oai_server.auth.keys import key_id
from oai_server.features import Feature
from oai_server.state import ServerState
from oai_server.store.service import StoreService
from oai_server.usage.records import UsageRecords
from oai_server.usage.routes import router
from oai_server.usage.writer import UsageWriter

__all__ = ["feature"]


def feature(core: ServerState, store: StoreService) -> Feature[UsageWriter | None]:
    """The Usage API's routes and the task writing the tallies, on the store's SQL database
    (nothing when the store has none)."""
    if store.database is None:
        return Feature(None)
    meter = core.metrics.usage
    records = UsageRecords(store.database)
    writer = UsageWriter(meter, records, store.breaker)
    admins = frozenset(key_id(key, core.secret) for key in core.settings.admin_api_key if key)
    routes = router(store, records, writer, store.breaker, admins)
    task: list[asyncio.Task[None]] = []

    async def start() -> None:
        task.append(asyncio.create_task(writer.run()))

    async def stop() -> None:
        await writer.stop(task.pop() if task else None)

    return Feature(writer, routes.routes, start=start, stop=stop)
