"""A real OTLP receiver, and the app exporting to it over HTTP/protobuf."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from oai_server.engine.fake import FakeEngine
from tests.tracing.receiver import Receiver, otlp_receiver
from tests.unit.conftest import serve


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """The receiver, and the standard OTEL_* environment pointing the exporter at it."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "oai-test")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-tenant=team-a")
    with otlp_receiver() as received:
        yield received


@asynccontextmanager
async def traced(
    receiver: Receiver, engine: FakeEngine | None = None, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """The app around `engine` (a fake's), exporting its traces to `receiver`; its spans
    are all exported once this exits (the app's shutdown flushes them)."""
    async with serve(
        engine or FakeEngine(), otlp_traces_endpoint=receiver.endpoint, **settings
    ) as client:
        yield client
