"""The `EmbeddingEngine` interface over vLLM's `AsyncLLM` with `runner="pooling"`.

A second vLLM engine (its own core process) beside the chat engine: the same CPU set-up
and process bookkeeping as `engine/vllm.py`, and vllm imported lazily, in `start`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from oai_server.engine import vllm_args
from oai_server.engine.pooling import EmbeddingEngine, EmbeddingModelInfo
from oai_server.engine.protocol import Tokenizer
from oai_server.engine.settings import EngineSettings
from oai_server.engine.vllm import VLLMTokenizer, engine_processes, reap
from oai_server.errors import EngineDeadError, EngineNotReadyError, InvalidRequestError

if TYPE_CHECKING:
    from vllm.v1.engine.async_llm import AsyncLLM

logger = logging.getLogger(__name__)

# Engine arguments that only a generating model takes.
_GENERATION_ONLY = ("structured_outputs_config", "generation_config", "override_generation_config")


class VLLMEmbeddingEngine(EmbeddingEngine):
    """vLLM's `AsyncLLM` running a pooling model; its engine core runs in a child process."""

    def __init__(self, options: EngineSettings, served_model_name: str | None = None) -> None:
        """`served_model_name` labels vLLM's metrics (else they carry the weights' path)."""
        self._options = options
        self._served_model_name = served_model_name
        self._llm: AsyncLLM | None = None
        self._tokenizer: VLLMTokenizer | None = None
        self._model_info: EmbeddingModelInfo | None = None
        self._processes: list[Any] = []

    async def start(self) -> None:
        await asyncio.to_thread(self._start_blocking)

    def _start_blocking(self) -> None:
        began = time.monotonic()
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.platforms import current_platform
        from vllm.v1.engine.async_llm import AsyncLLM

        on_cpu = current_platform.is_cpu()
        if on_cpu:
            vllm_args.configure_cpu(self._options)
        args = vllm_args.engine_args(self._options, on_cpu, self._served_model_name)
        for name in _GENERATION_ONLY:
            args.pop(name, None)
        args["runner"] = "pooling"
        logger.debug("starting the vLLM embedding engine: %s", args)
        known = {p.pid for p in engine_processes()}
        llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
        hf_tokenizer = llm.get_tokenizer()
        config = llm.model_config
        self._tokenizer = VLLMTokenizer(hf_tokenizer)
        self._model_info = EmbeddingModelInfo(
            max_model_len=config.max_model_len,
            source=self._options.model or "",
            vocab_size=len(hf_tokenizer),
            dimensions=int(config.embedding_size),
            matryoshka=bool(config.is_matryoshka),
            dtype=str(config.dtype).removeprefix("torch."),
        )
        self._llm = llm
        self._processes = engine_processes(known)
        logger.debug("vLLM embedding engine ready in %.1f s", time.monotonic() - began)

    async def stop(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            await asyncio.to_thread(llm.shutdown)
        reap(self._processes)
        self._processes = []

    @property
    def model_info(self) -> EmbeddingModelInfo:
        if self._model_info is None:
            raise EngineNotReadyError("The embedding engine is still loading the model.")
        return self._model_info

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            raise EngineNotReadyError("The embedding engine is still loading the model.")
        return self._tokenizer

    def _ready_llm(self) -> AsyncLLM:
        if self._llm is None:
            raise EngineNotReadyError("The embedding engine is still loading the model.")
        if self._llm.errored:
            raise EngineDeadError("The embedding engine has stopped; restart the server.")
        return self._llm

    async def check_health(self) -> None:
        self._ready_llm()

    def running_requests(self) -> int:
        return 0 if self._llm is None else self._llm.get_num_unfinished_requests()

    async def embed(
        self, request_id: str, prompt_token_ids: list[int], dimensions: int | None = None
    ) -> list[float]:
        from vllm.exceptions import VLLMClientError
        from vllm.inputs import tokens_input
        from vllm.pooling_params import PoolingParams
        from vllm.v1.engine.exceptions import EngineDeadError as VLLMEngineDeadError

        llm = self._ready_llm()
        params = PoolingParams(task="embed", dimensions=dimensions)
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
