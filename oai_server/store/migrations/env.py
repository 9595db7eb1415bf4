"""Alembic environment: runs on the connection `oai_server.store.migrate` hands it."""

from __future__ import annotations

from alembic import context

from oai_server.store.migrate import VERSION_TABLE
from oai_server.store.tables import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    render_as_batch=True,  # SQLite alters tables by copying them
)
with context.begin_transaction():
    context.run_migrations()
