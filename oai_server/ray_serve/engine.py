"""The engine a replica holds: built once per replica, started before it takes traffic."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Callable

from oai_server.engine.protocol import Engine, Tokenizer
from oai_server.engine.types import GenerationStep, ModelInfo, SamplingOptions
from oai_server.settings import Settings

EngineFactory = Callable[[Settings], Engine]


def load_factory(path: str | None) -> EngineFactory:
    """The engine factory at `module:function`; vLLM's engine (`build_engine`) when None.

    Only tests and custom engines pass a path (the tests pass the fake engine's).
    """
    if path is None:
        from oai_server.__main__ import build_engine  # imports vLLM: only when used

        return build_engine
    module, _, name = path.partition(":")
    factory: EngineFactory = getattr(importlib.import_module(module), name)
    return factory


class StartOnce(Engine):
    """An engine whose `start` runs once however often it is called.

    The replica awaits `start` in its constructor, so Serve routes no request to it
    (and runs no health check) before the model is loaded, and a failed load fails the
    replica, which Serve retries. The app's lifespan then calls `start` again: a no-op.
    """

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self._starting: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._starting is None:
            self._starting = asyncio.ensure_future(self.inner.start())
        await asyncio.shield(self._starting)

    async def stop(self) -> None:
        await self.inner.stop()

    @property
    def model_info(self) -> ModelInfo:
        return self.inner.model_info

    @property
    def tokenizer(self) -> Tokenizer:
        return self.inner.tokenizer

    def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
        return self.inner.generate(request_id, prompt_token_ids, options)

    async def abort(self, request_id: str) -> None:
        await self.inner.abort(request_id)

    async def check_health(self) -> None:
        await self.inner.check_health()

    def running_requests(self) -> int:
        return self.inner.running_requests()
