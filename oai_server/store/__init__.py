"""Stored objects on a database: chat completions (`store: true`), responses and
conversations, on one schema (SQLite by default, PostgreSQL by URL).

Layout: `interface` (what a store offers), `sql` + `tables` + `queries` + `migrations`
(SQLAlchemy async and Alembic), `writer` (queued writes off the request path), `service`
(start-up, health, retention, who owns what), `params` (list parameters and envelope),
`routes` (the HTTP endpoints), `hook` (where chat answers are recorded), `chat_records`
(answers as records and back). `feature` wires it into the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oai_server.features import Feature
from oai_server.store import routes
from oai_server.store.health import StoreHealth
from oai_server.store.metrics import StoreMetrics
from oai_server.store.service import StoreService
from oai_server.store.sql import SQLStore
from oai_server.store.url import async_url

if TYPE_CHECKING:
    from oai_server.state import ServerState

__all__ = ["StoreService", "feature"]


def feature(state: ServerState) -> Feature[StoreService]:
    """The store's routes, and its service: migrated at start-up, its writes drained at the end."""
    settings = state.settings
    service = StoreService(
        SQLStore(async_url(settings.store_url, settings.data_dir)),
        StoreMetrics(state.metrics.registry),
        StoreHealth(),
        store_all=settings.store_all,
        retention_days=settings.store_retention_days,
    )
    return Feature(service, routes.router.routes, start=service.start, stop=service.stop)
