"""`EngineRouter`: several chat models, each on its own engine, behind one `Engine`.

The services and everything that wraps the engine (metrics, limits, the drain, adapters)
see one engine as before; a request goes to the engine its `SamplingOptions.model` names
(the first model's when None), and a service reads the tokenizer and limits of the model
a request names through `serving(model)`, so each model keeps its own tokenizer, chat
template and context length.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol

from oai_server.engine.protocol import Engine, Tokenizer
from oai_server.engine.types import GenerationStep, ImageInput, ModelInfo, SamplingOptions
from oai_server.errors import EngineDeadError, ModelNotFoundError

logger = logging.getLogger(__name__)


class EngineRouter(Engine):
    """`engines` by served name, in order; the first serves requests that name no model."""

    def __init__(self, engines: Mapping[str, Engine]) -> None:
        if not engines:
            raise ValueError("an engine router needs at least one engine")
        self.engines = dict(engines)
        self.default = next(iter(self.engines))

    def serving(self, model: str | None) -> Engine:
        engine = self.engines.get(model or self.default)
        if engine is None:
            raise ModelNotFoundError(f"The model '{model}' does not exist.")
        return engine

    async def start(self) -> None:
        # One after the other: two vLLM engines loading at once in one process share
        # vLLM's process-wide configuration (and the CPU settings' environment).
        for engine in self.engines.values():
            await engine.start()

    async def stop(self) -> None:
        await stop_all(self.engines)

    @property
    def model_info(self) -> ModelInfo:
        return self.engines[self.default].model_info

    @property
    def tokenizer(self) -> Tokenizer:
        return self.engines[self.default].tokenizer

    def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
        return self.serving(options.model).generate(request_id, prompt_token_ids, options)

    async def count_prompt_tokens(
        self, prompt_token_ids: list[int], images: Sequence[ImageInput]
    ) -> int:
        # A service counts on `serving(model)`; here, the first model's processor.
        return await self.engines[self.default].count_prompt_tokens(prompt_token_ids, images)

    async def load_adapter(self, name: str, path: str) -> None:
        # Adapters loaded after start-up (--lora-dir, run-time loads) are the first model's.
        await self.engines[self.default].load_adapter(name, path)

    async def unload_adapter(self, name: str) -> None:
        await self.engines[self.default].unload_adapter(name)

    async def abort(self, request_id: str) -> None:
        # Request ids are unique across engines; aborting an id an engine does not hold
        # is a no-op there.
        for engine in self.engines.values():
            await engine.abort(request_id)

    async def check_health(self) -> None:
        """Every model must serve: the first that cannot raises, naming it."""
        for name, engine in self.engines.items():
            try:
                await engine.check_health()
            except EngineDeadError as exc:
                raise EngineDeadError(f"The model '{name}' has stopped: {exc}") from exc

    def running_requests(self) -> int:
        return sum(engine.running_requests() for engine in self.engines.values())


class Stoppable(Protocol):
    async def stop(self) -> None: ...


async def stop_all(engines: Mapping[str, Stoppable]) -> None:
    """Stop `engines` (by name) all at once: each waits seconds on its processes' exit.
    Every one is stopped whatever another's stop raised (logged): each holds processes that
    must not outlive the server."""
    names = list(engines)
    results = await asyncio.gather(*(engines[n].stop() for n in names), return_exceptions=True)
    for name, result in zip(names, results, strict=True):
        if isinstance(result, Exception):
            logger.error("stopping the engine of '%s' failed", name, exc_info=result)
        elif isinstance(result, BaseException):
            raise result
