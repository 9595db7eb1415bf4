"""Stored objects on a database: chat completions (`store: true`) now, responses and
conversations later, on one schema (SQLite by default, PostgreSQL by URL).

Layout: `interface` (what a store offers), `sql` + `tables` + `queries` + `migrations`
(SQLAlchemy async and Alembic), `guarded` (a deadline on every call, through the
database's breaker), `writer` (queued writes off the request path), `service` (start-up,
health, retention), `routes` + `params` (the HTTP endpoints), `hook` (where
chat answers are recorded), `chat_records` + `assemble` (answers as records and back).
"""

from __future__ import annotations

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from oai_server.resilience import Dependencies
from oai_server.settings import Settings
from oai_server.store import routes
from oai_server.store.metrics import StoreMetrics
from oai_server.store.service import StoreService, store_breaker
from oai_server.store.sql import SQLStore
from oai_server.store.url import async_url

__all__ = ["StoreService", "install"]


def install(
    app: FastAPI, settings: Settings, registry: CollectorRegistry, dependencies: Dependencies
) -> StoreService:
    """Add the stored-completion routes to `app`; its lifespan must `start()` and `stop()` it."""
    store = SQLStore(async_url(settings.store_url, settings.data_dir))
    service = StoreService(
        store,
        StoreMetrics(registry),
        dependencies.add(store_breaker(store)),
        store_all=settings.store_all,
        retention_days=settings.store_retention_days,
    )
    app.state.store = service
    app.include_router(routes.router)
    return service
