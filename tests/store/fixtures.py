"""`store_url`: each store test runs on SQLite and on a real PostgreSQL server this session starts.

A plugin of the whole suite (registered in `tests/conftest.py`), so the store's tests and
the Responses API's share one PostgreSQL server.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.fixtures.postgres import PostgresServer

_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(
    request: pytest.FixtureRequest, tmp_path: Path, postgres: PostgresServer
) -> str:
    """A fresh, empty database of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'store.db'}"
    return await postgres.create_database(f"test_{next(_databases)}")
