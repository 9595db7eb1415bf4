"""Versioned schema migrations (Alembic), applied programmatically at start-up.

The migration scripts ship inside the package (`migrations/versions`), so an installed
server upgrades its database without an `alembic.ini` or a command to run.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

VERSION_TABLE = "store_alembic_version"
SCRIPTS = Path(__file__).resolve().parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def revisions() -> list[str]:
    """Every revision, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def _upgrade(connection: Connection, revision: str) -> None:
    command.upgrade(alembic_config(connection), revision)


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the database to `revision` (by default the newest), in one transaction."""
    async with engine.begin() as connection:
        await connection.run_sync(_upgrade, revision)
