"""The engines a replica holds: built once per replica, started before it takes traffic."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from oai_server.engine.pooling import EmbeddingEngine, EmbeddingModelInfo
from oai_server.engine.protocol import Engine, Tokenizer
from oai_server.engine.wrapper import EngineWrapper
from oai_server.models.entries import ModelEntry
from oai_server.settings import Settings

# Each is given the replica's settings and its model entries (read once per replica).
EngineFactory = Callable[[Settings, Sequence[ModelEntry]], Engine]
EmbeddingFactory = Callable[[Settings, Sequence[ModelEntry]], EmbeddingEngine | None]


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def load_factory(path: str | None) -> EngineFactory:
    """The engine factory at `module:function`; vLLM's engine (`build_engine`) when None.

    Only tests and custom engines pass a path (the tests pass the fake engine's).
    """
    if path is None:
        from oai_server.assembly import build_engine  # imports vLLM: only when used

        return build_engine
    factory: EngineFactory = _load(path)
    return factory


def load_embedding_factory(path: str | None) -> EmbeddingFactory:
    """The embedding engine factory at `module:function` (None: serves none); vLLM's
    (`build_embedding_engine`: the entries' embedding model) when `path` is None."""
    if path is None:
        from oai_server.assembly import build_embedding_engine  # imports vLLM

        return build_embedding_engine
    factory: EmbeddingFactory = _load(path)
    return factory


class _Once:
    """`start` run at most once, however often it is called; every caller awaits that run."""

    def __init__(self, start: Callable[[], Awaitable[None]]) -> None:
        self._start = start
        self._starting: asyncio.Future[None] | None = None

    async def __call__(self) -> None:
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)


class StartOnce(EngineWrapper):
    """An engine whose `start` runs once however often it is called.

    The replica awaits `start` in its constructor, so Serve routes no request to it
    (and runs no health check) before the model is loaded, and a failed load fails the
    replica, which Serve retries. The app's lifespan then calls `start` again: a no-op.
    """

    def __init__(self, inner: Engine) -> None:
        super().__init__(inner)
        self._once = _Once(inner.start)

    async def start(self) -> None:
        await self._once()


class StartOnceEmbedding(EmbeddingEngine):
    """`StartOnce` for the embedding engine: every other call goes to `inner`."""

    def __init__(self, inner: EmbeddingEngine) -> None:
        self.inner = inner
        self._once = _Once(inner.start)

    async def start(self) -> None:
        await self._once()

    async def stop(self) -> None:
        await self.inner.stop()

    @property
    def model_info(self) -> EmbeddingModelInfo:
        return self.inner.model_info

    @property
    def tokenizer(self) -> Tokenizer:
        return self.inner.tokenizer

    async def embed(
        self, request_id: str, prompt_token_ids: list[int], dimensions: int | None = None
    ) -> list[float]:
        return await self.inner.embed(request_id, prompt_token_ids, dimensions)

    async def classify(
        self, request_id: str, prompt_token_ids: list[int], second_from: int | None = None
    ) -> list[float]:
        return await self.inner.classify(request_id, prompt_token_ids, second_from)

    def pair(self, first: str, second: str) -> tuple[list[int], int | None]:
        return self.inner.pair(first, second)

    async def check_health(self) -> None:
        await self.inner.check_health()

    def running_requests(self) -> int:
        return self.inner.running_requests()
