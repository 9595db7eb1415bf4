"""`cache`: the hit and miss runs against a live app with the cache on."""

from __future__ import annotations

from benchmarks.response_cache import measure, miss_cost, table
from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve_async


async def test_hits_are_hits_and_misses_are_misses() -> None:
    engine = FakeEngine(reply="one two three four", token_delay=0.005)
    app = create_app(Settings(response_cache="memory"), engine)
    async with serve_async(app) as root:
        rows = await measure(f"{root}/v1", "chat", [1, 3], requests=6, max_tokens=4)
    assert [(r["run"], r["concurrency"], r["x-cache"]) for r in rows] == [
        ("miss", 1, "miss"),
        ("hit", 1, "hit"),
        ("miss", 3, "miss"),
        ("hit", 3, "hit"),
    ]
    # Warm-ups and fills included: each miss is one engine request, hits none.
    assert len(engine.calls) == (1 + 6 + 1) + (3 + 6 + 1)
    assert all(r["ttft_p50_ms"] > 0 for r in rows)
    assert "| hit | 3 | 6 | hit |" in table("memory", rows)
    misses = [r for r in rows if r["run"] == "miss"]
    assert "| 3 | 1.000 | 1.000 | 1.000 |" in miss_cost(misses, rows, "memory")
