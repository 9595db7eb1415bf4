"""Engine factories the Ray replicas import by path (`engine_factory=tests.ray.engines:...`)."""

from __future__ import annotations

from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings

TOKEN_DELAY_S = 0.05
# Long enough that a stream outlives every test that reads it partly.
REPLY = " ".join(f"w{i}" for i in range(400))


def slow_fake(settings: Settings) -> FakeEngine:
    """One word every 50 ms: a stream of n tokens takes n / 20 seconds."""
    return FakeEngine(reply=REPLY, token_delay=TOKEN_DELAY_S)


def dying_fake(settings: Settings) -> FakeEngine:
    """Dies (as vLLM's engine core can) at the second step of its first request."""
    return FakeEngine(fail_at_step=1)
