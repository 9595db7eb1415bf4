"""`EngineWrapper`: an `Engine` that hands every call to another one.

What wraps an engine (measuring it, starting it once per Ray replica) subclasses this and
overrides only what it adds to, so a change to the interface is made here once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from oai_server.engine.protocol import Engine, Tokenizer
from oai_server.engine.types import GenerationStep, ImageInput, ModelInfo, SamplingOptions


class EngineWrapper(Engine):
    """Every call goes to `inner`."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    def serving(self, model: str | None) -> Engine:
        return self.inner.serving(model)

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

    async def count_prompt_tokens(
        self, prompt_token_ids: list[int], images: Sequence[ImageInput]
    ) -> int:
        return await self.inner.count_prompt_tokens(prompt_token_ids, images)

    async def load_adapter(self, name: str, path: str) -> None:
        await self.inner.load_adapter(name, path)

    async def unload_adapter(self, name: str) -> None:
        await self.inner.unload_adapter(name)

    async def abort(self, request_id: str) -> None:
        await self.inner.abort(request_id)

    async def check_health(self) -> None:
        await self.inner.check_health()

    def running_requests(self) -> int:
        return self.inner.running_requests()
