"""The Realtime-vs-SSE benchmark against the app with the fake engine behind a real uvicorn."""

from __future__ import annotations

import argparse

from benchmarks.realtime import measure, table
from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve_async


async def test_both_transports_measured_with_their_ratio() -> None:
    engine = FakeEngine(reply="red orange yellow green", token_delay=0.002)
    async with serve_async(create_app(Settings(), engine)) as root:
        args = argparse.Namespace(
            base_url=f"{root}/v1", model=None, api_key="x", sessions=8, max_tokens=16, rounds=1
        )
        [(rt, sse)] = await measure(args)
    assert [o.tokens for o in rt.outcomes] == [4] * 8
    assert [o.tokens for o in sse.outcomes] == [4] * 8
    assert all(0 < o.ttft <= o.total for o in rt.outcomes + sse.outcomes)
    assert len(engine.calls) == 16
    rendered = table([(rt, sse)])
    assert "| 1 | ratio |" in rendered
