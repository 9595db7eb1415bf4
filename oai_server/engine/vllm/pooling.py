"""The `EmbeddingEngine` interface over vLLM's `AsyncLLM` with `runner="pooling"`.

A second vLLM engine (its own core process) beside the chat engine: the same CPU set-up
and process bookkeeping as `engine/vllm/engine.py`, and vllm imported lazily, in `start`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from oai_server.engine.pooling import EmbeddingEngine, EmbeddingModelInfo
from oai_server.engine.settings import EngineSettings
from oai_server.engine.vllm import args as vllm_args
from oai_server.engine.vllm import flags as vllm_flags
from oai_server.engine.vllm.holder import (
    AsyncLLMHolder,
    VLLMTokenizer,
    longest_token,
)
from oai_server.errors import EngineDeadError, EngineNotReadyError, InvalidRequestError

if TYPE_CHECKING:
    from vllm.pooling_params import PoolingParams

logger = logging.getLogger(__name__)

# Engine arguments that only a generating model takes.
_GENERATION_ONLY = ("structured_outputs_config", "generation_config", "override_generation_config")


class VLLMEmbeddingEngine(AsyncLLMHolder, EmbeddingEngine):
    """vLLM's `AsyncLLM` running a pooling model; its engine core runs in a child process."""

    _what = "embedding engine"

    def __init__(self, options: EngineSettings, served_model_name: str | None = None) -> None:
        """`served_model_name` labels vLLM's metrics (else they carry the weights' path)."""
        super().__init__()
        self._options = options
        self._served_model_name = served_model_name
        self._model_info: EmbeddingModelInfo | None = None

    async def start(self) -> None:
        await asyncio.to_thread(self._start_blocking)
        # A cross-encoder or classifier (`*ForSequenceClassification`) pools by `classify`.
        tasks = await self._ready_llm().get_supported_tasks()
        if "embed" not in tasks and "classify" in tasks:
            info = self.model_info
            self._model_info = dataclasses.replace(info, task="classify")

    def _start_blocking(self) -> None:
        began = time.monotonic()
        from vllm.platforms import current_platform
        from vllm.v1.engine.async_llm import AsyncLLM

        on_cpu = current_platform.is_cpu()
        if on_cpu:
            vllm_args.configure_cpu(self._options)
        args = vllm_args.engine_args(self._options, on_cpu, self._served_model_name)
        for name in _GENERATION_ONLY:
            args.pop(name, None)
        args["runner"] = "pooling"
        # vLLM's Prometheus logger unregisters every `vllm:*` series already registered
        # in the process when it is created: with its own logger this engine would take the
        # chat engine's series off /metrics. Its own figures are the oai_embedding_* series.
        args["disable_log_stats"] = True
        logger.debug("starting the vLLM embedding engine: %s", args)
        known = self._watch()
        llm = AsyncLLM.from_engine_args(vllm_flags.async_engine_args(args))
        hf_tokenizer = llm.get_tokenizer()
        tokenizer = VLLMTokenizer(hf_tokenizer)
        config = llm.model_config
        labels: dict[Any, str] = getattr(config.hf_config, "id2label", None) or {}
        self._model_info = EmbeddingModelInfo(
            max_model_len=config.max_model_len,
            source=self._options.model or "",
            vocab_size=len(hf_tokenizer),
            dimensions=int(config.embedding_size),
            matryoshka=bool(config.is_matryoshka),
            dtype=str(config.dtype).removeprefix("torch."),
            # Before the engine says it is ready (`_hold`): see `engine.token_bytes`.
            longest_token_bytes=longest_token(tokenizer, len(hf_tokenizer)),
            labels=tuple(labels[key] for key in sorted(labels, key=int)),
        )
        self._hold(llm, known, tokenizer)
        del llm  # nothing but `self` may keep the engine alive past `stop` (see VLLMEngine)
        logger.debug("vLLM embedding engine ready in %.1f s", time.monotonic() - began)

    @property
    def model_info(self) -> EmbeddingModelInfo:
        if self._model_info is None:
            raise EngineNotReadyError("The embedding engine is still loading the model.")
        return self._model_info

    async def embed(
        self, request_id: str, prompt_token_ids: list[int], dimensions: int | None = None
    ) -> list[float]:
        from vllm.pooling_params import PoolingParams

        params = PoolingParams(task="embed", dimensions=dimensions)
        return await self._pool(request_id, prompt_token_ids, params)

    async def classify(
        self, request_id: str, prompt_token_ids: list[int], second_from: int | None = None
    ) -> list[float]:
        from vllm.pooling_params import PoolingParams

        params = PoolingParams(task="classify")
        if second_from is not None:
            # What vLLM's cross-encoder scoring passes: where the token type ids turn to 1.
            params.extra_kwargs = {"compressed_token_type_ids": second_from}
        return await self._pool(request_id, prompt_token_ids, params)

    def pair(self, first: str, second: str) -> tuple[list[int], int | None]:
        """The tokenizer's own pair encoding (`text`, `text_pair`), as vLLM's
        cross-encoder scoring builds it; its token type ids as where the 1s begin."""
        encoded = self.tokenizer.backend(text=first, text_pair=second)
        tokens: list[int] = list(encoded["input_ids"])
        types: list[int] | None = encoded.get("token_type_ids")
        if types is None:
            return tokens, None
        return tokens, next((i for i, t in enumerate(types) if t == 1), len(types))

    async def _pool(
        self, request_id: str, prompt_token_ids: list[int], params: PoolingParams
    ) -> list[float]:
        from vllm.exceptions import VLLMClientError
        from vllm.inputs import tokens_input
        from vllm.v1.engine.exceptions import EngineDeadError as VLLMEngineDeadError

        llm = self._ready_llm()
        final = None
        try:
            async for out in llm.encode(tokens_input(prompt_token_ids), params, request_id):
                final = out
        except VLLMEngineDeadError as exc:
            raise EngineDeadError("The embedding engine has stopped; restart the server.") from exc
        except VLLMClientError as exc:
            raise InvalidRequestError(str(exc), param=getattr(exc, "parameter", None)) from exc
        if final is None:
            raise EngineDeadError("The embedding engine ended a request without output.")
        values: list[float] = final.outputs.data.tolist()
        return values
