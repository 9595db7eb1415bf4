"""The engine a replica holds: built once per replica, started before it takes traffic."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable

from oai_server.engine.protocol import Engine
from oai_server.engine.wrapper import EngineWrapper
from oai_server.settings import Settings

EngineFactory = Callable[[Settings], Engine]


def load_factory(path: str | None) -> EngineFactory:
    """The engine factory at `module:function`; vLLM's engine (`build_engine`) when None.

    Only tests and custom engines pass a path (the tests pass the fake engine's).
    """
    if path is None:
        from oai_server.engine.build import build_engine  # imports vLLM: only when used

        return build_engine
    module, _, name = path.partition(":")
    factory: EngineFactory = getattr(importlib.import_module(module), name)
    return factory


class StartOnce(EngineWrapper):
    """An engine whose `start` runs once however often it is called.

    The replica awaits `start` in its constructor, so Serve routes no request to it
    (and runs no health check) before the model is loaded, and a failed load fails the
    replica, which Serve retries. The app's lifespan then calls `start` again: a no-op.
    """

    def __init__(self, inner: Engine) -> None:
        super().__init__(inner)
        self._starting: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._starting is None:
            self._starting = asyncio.ensure_future(self.inner.start())
        await asyncio.shield(self._starting)
