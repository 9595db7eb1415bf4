"""The tests' shared redis-server: the session fixture `redis_url` (import it into a
conftest), on `benchmarks.fixtures.redis_server.RedisServer`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.fixtures.redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One redis-server for the session; tests keep apart by their own key names."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
