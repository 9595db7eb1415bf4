"""LoRA adapters served after start-up: by name from `--lora-dir` on first use, or loaded
and unloaded at run time (`/v1/load_lora_adapter`, `--allow-runtime-lora`).

`AdapterEngine` wraps the chat engine: a request naming an adapter of `--lora-dir` that
is not loaded yet waits while it loads (once, however many ask at the same moment), then
generates as any other. Adapters named by `--lora-modules` are the engine's own, loaded
with it. Paths come only from `--lora-dir` and a name is only ever one directory inside
it, so no request can make the server read anywhere else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from oai_server.engine.lora import check_adapter
from oai_server.engine.protocol import Engine
from oai_server.engine.types import GenerationStep, SamplingOptions
from oai_server.engine.wrapper import EngineWrapper
from oai_server.errors import InvalidRequestError, ModelNotFoundError
from oai_server.models.registry import ModelRegistry, ServedModel

logger = logging.getLogger(__name__)


class AdapterEngine(EngineWrapper):
    """`inner`, loading adapters of `lora_dir` as requests first name them."""

    def __init__(
        self,
        inner: Engine,
        models: ModelRegistry,
        base: str,
        lora_dir: Path | None,
        max_rank: int,
    ) -> None:
        super().__init__(inner)
        self.models = models
        self.base = base
        self.lora_dir = lora_dir
        self.max_rank = max_rank
        self._loading: dict[str, asyncio.Task[None]] = {}
        if lora_dir is not None:
            models.resolver = self._resolve

    def path_of(self, name: str, param: str) -> Path:
        """The directory `name` means inside `--lora-dir` (a 400 for any other name)."""
        if self.lora_dir is None:
            raise InvalidRequestError(
                "This server loads adapters only from --lora-dir, and has none.", param=param
            )
        if not name or "/" in name or "\\" in name or ".." in name or name.startswith("."):
            raise InvalidRequestError(
                f"'{name}' is not an adapter name: a name is one directory in --lora-dir, "
                "without '/', '..' or a leading '.'.",
                param=param,
            )
        return self.lora_dir / name

    def _resolve(self, name: str, param: str) -> ServedModel | None:
        """The adapter `name` of `--lora-dir`, checked but not loaded; None if there is none."""
        path = self.path_of(name, param)
        if not path.is_dir():
            return None
        check_adapter(str(path), self.max_rank, param=param)
        return ServedModel(name, "chat", name, parent=self.base)

    async def load(self, name: str, path: Path, *, param: str = "lora_path") -> None:
        """Load the adapter at `path` as `name`; the name must be new."""
        if self.models.serves(name) or name in self._loading:
            raise InvalidRequestError(
                f"The name '{name}' is already served; unload it first or choose another.",
                param="lora_name",
            )
        await self._load(name, path, param)

    async def _load(self, name: str, path: Path, param: str) -> None:
        check_adapter(str(path), self.max_rank, param=param)
        task = asyncio.ensure_future(self.inner.load_adapter(name, str(path)))
        self._loading[name] = task
        try:
            await asyncio.shield(task)
        finally:
            self._loading.pop(name, None)
        self.models.add(ServedModel(name, "chat", name, parent=self.base))
        logger.info("LoRA adapter %s loaded", name)

    async def unload(self, name: str) -> None:
        """Serve the adapter `name` no more (a 404 if no adapter has that name)."""
        if not self.models.serves(name):
            raise ModelNotFoundError(f"The adapter '{name}' is not loaded.", param="lora_name")
        if self.models.get(name).parent != self.base:
            raise InvalidRequestError(
                f"'{name}' is a model, not an adapter; only adapters can be unloaded.",
                param="lora_name",
            )
        await self.inner.unload_adapter(name)
        self.models.remove(name)
        logger.info("LoRA adapter %s unloaded", name)

    async def _ensure(self, name: str) -> None:
        """Load `name` from `--lora-dir` unless it is served already; requests that ask
        at the same moment wait for the one load."""
        if self.models.serves(name):
            return
        pending = self._loading.get(name)
        if pending is not None:
            await asyncio.shield(pending)
            return
        await self._load(name, self.path_of(name, "model"), "model")

    async def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
        if options.adapter is not None and self.lora_dir is not None:
            await self._ensure(options.adapter)
        async for step in self.inner.generate(request_id, prompt_token_ids, options):
            yield step
