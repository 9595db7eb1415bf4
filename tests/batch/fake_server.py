"""A server on the fake engine in a process of its own, for a test to kill mid-batch:
`python -m tests.batch.fake_server STORE_URL PORT`."""

from __future__ import annotations

import sys

import uvicorn

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings

if __name__ == "__main__":
    store_url, port = sys.argv[1], int(sys.argv[2])
    settings = Settings(
        store_url=store_url,
        # Renewed every second, each renewal given a second: a loaded machine's slow query
        # does not lose it, and a killed replica's batch is taken over within seconds.
        batch_lease_seconds=3.0,
        batch_max_in_flight=2,
        batch_max_in_flight_idle=2,
    )
    app = create_app(settings, FakeEngine(token_delay=0.02))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
