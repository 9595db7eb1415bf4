"""Engine factories the Ray replicas import by path (`engine_factory=tests.ray.engines:...`)."""

from __future__ import annotations

from collections.abc import Sequence

from oai_server.engine.fake import FakeEngine
from oai_server.engine.fake.pooling import FakeEmbeddingEngine
from oai_server.engine.router import EngineRouter
from oai_server.models.entries import ModelEntry
from oai_server.settings import Settings

TOKEN_DELAY_S = 0.05
# Long enough that a stream outlives every test that reads it partly.
REPLY = " ".join(f"w{i}" for i in range(400))


def slow_fake(settings: Settings, entries: Sequence[ModelEntry]) -> FakeEngine:
    """One word every 50 ms: a stream of n tokens takes n / 20 seconds."""
    return FakeEngine(reply=REPLY, token_delay=TOKEN_DELAY_S)


def dying_fake(settings: Settings, entries: Sequence[ModelEntry]) -> FakeEngine:
    """Dies (as vLLM's engine core can) at the second step of its first request."""
    return FakeEngine(fail_at_step=1)


def one_fake_per_model(settings: Settings, entries: Sequence[ModelEntry]) -> EngineRouter:
    """A fake engine for each chat model of `entries`, each saying which model it is."""
    chat = [entry.name for entry in entries if entry.kind == "chat"]
    return EngineRouter({name: FakeEngine(reply=f"I am {name}.") for name in chat})


def fake_naming_its_cores(settings: Settings, entries: Sequence[ModelEntry]) -> FakeEngine:
    """Says the cores its replica gave its engine (`--cpu-threads-bind`)."""
    return FakeEngine(reply=f"cores {settings.cpu_threads_bind}")


def fake_embedder(settings: Settings, entries: Sequence[ModelEntry]) -> FakeEmbeddingEngine | None:
    """The fake embedding engine when `entries` serve an embedding model, as vLLM's
    factory (`build_embedding_engine`) builds the real one."""
    served = any(entry.kind == "embedding" for entry in entries)
    return FakeEmbeddingEngine() if served else None


class _DyingEmbedder(FakeEmbeddingEngine):
    """Dies (as vLLM's engine core can) at its first input."""

    async def embed(
        self, request_id: str, prompt_token_ids: list[int], dimensions: int | None = None
    ) -> list[float]:
        self.kill()
        return await super().embed(request_id, prompt_token_ids, dimensions)


def dying_embedder(settings: Settings, entries: Sequence[ModelEntry]) -> FakeEmbeddingEngine:
    """An embedding engine that dies at its first input; the chat engine stays well."""
    return _DyingEmbedder()
