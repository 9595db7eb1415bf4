"""Stored objects on a database: chat completions (`store: true`), responses and
conversations, on one schema (SQLite by default, PostgreSQL by URL).

Layout: `interface` (what a store offers), `sql` + `tables` + `queries` + `migrations`
(SQLAlchemy async and Alembic), `writer` (queued writes off the request path), `service`
(start-up, health, retention, who owns what), `params` (list parameters and envelope),
`routes` (the HTTP endpoints), `hook` (where chat answers are recorded), `chat_records`
(answers as records and back), `owners` (API keys' former ids carried over to their ids).
`feature` wires it into the app.
"""

from __future__ import annotations

from collections.abc import Mapping

from oai_server.features import Feature
from oai_server.state import ServerState
from oai_server.store import routes
from oai_server.store.metrics import StoreMetrics
from oai_server.store.service import StoreService, store_breaker
from oai_server.store.sql import SQLStore
from oai_server.store.url import async_url

__all__ = ["StoreService", "feature"]


def feature(core: ServerState, renames: Mapping[str, str]) -> Feature[StoreService]:
    """The store's routes, and its service: migrated at start-up (what API keys own under
    their former ids, `renames`' keys, carried over to their ids now), its writes drained
    at the end; `/health` says whether it keeps up."""
    settings = core.settings
    store = SQLStore(async_url(settings.store_url, settings.data_dir), renames)
    service = StoreService(
        store,
        StoreMetrics(core.metrics.registry),
        core.dependencies.add(store_breaker(store)),
        store_all=settings.store_all,
        retention_days=settings.store_retention_days,
        database=store.engine,
    )
    return Feature(
        service,
        routes.router(settings, service).routes,
        start=service.start,
        stop=service.stop,
        health=lambda: {"store": service.health.status},
    )
