"""The `Engine` interface over vLLM's `AsyncLLM`: the only module that imports vllm.

vllm is imported lazily, in `start`, so the server (and its tests with the fake
engine) import fast and without vllm installed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, get_args

from oai_server.engine.protocol import Engine, Tokenizer
from oai_server.engine.settings import EngineSettings
from oai_server.engine.types import (
    ChoiceDelta,
    FinishReason,
    GenerationStep,
    ModelInfo,
    SamplingOptions,
    StructuredOutput,
    TokenLogprob,
)
from oai_server.errors import (
    EngineDeadError,
    EngineNotReadyError,
    EngineOverloadedError,
    InvalidRequestError,
)

if TYPE_CHECKING:
    from vllm.v1.engine.async_llm import AsyncLLM

logger = logging.getLogger(__name__)


class VLLMTokenizer(Tokenizer):
    """The engine's own Hugging Face tokenizer, so server and engine count alike."""

    def __init__(self, hf_tokenizer: Any) -> None:
        self._tok = hf_tokenizer

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens))

    def decode(self, token_ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(token_ids)))

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        *,
        add_generation_prompt: bool,
        continue_final_message: bool = False,
        chat_template: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ) -> str:
        return str(
            self._tok.apply_chat_template(
                messages,
                tools=tools,
                chat_template=chat_template,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final_message,
                tokenize=False,
                **(template_kwargs or {}),
            )
        )


def _configure_cpu(options: EngineSettings) -> None:
    """Set the CPU backend's environment before the engine process is spawned.

    A setting given explicitly wins over the environment; an unset one leaves what the
    environment says, else takes our default.
    """
    if options.cpu_kvcache_space is not None:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(options.cpu_kvcache_space)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    bind = options.cpu_threads_bind
    if bind == "auto":
        os.environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)
        return
    if bind is None and "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return
    if bind in (None, "all"):
        # vLLM keeps a core for the front end by default; on small machines the
        # engine is the bottleneck, and every core computing gave 1.4x the tokens/s.
        bind = f"0-{(os.cpu_count() or 1) - 1}"
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = bind


def _engine_args(options: EngineSettings, on_cpu: bool) -> dict[str, Any]:
    enforce_eager = options.enforce_eager
    if enforce_eager is None:
        enforce_eager = on_cpu
    args: dict[str, Any] = {
        # Compact JSON in structured output and tool calls: small models otherwise wander
        # into endless runs of whitespace, and OpenAI's own JSON is compact too. Only
        # xgrammar and guidance can do that; guidance covers the most of JSON Schema.
        "structured_outputs_config": {"backend": "guidance", "disable_any_whitespace": True},
        "model": options.model,
        "dtype": options.dtype,
        "enforce_eager": enforce_eager,
        "seed": options.seed,
        "trust_remote_code": options.trust_remote_code,
        "max_model_len": options.max_model_len,
        "max_num_seqs": options.max_num_seqs,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "max_num_queued_reqs": options.max_num_queued_reqs,
        "max_num_queued_tokens": options.max_num_queued_tokens,
        "stream_interval": options.stream_interval,
    }
    if not on_cpu:
        args["tensor_parallel_size"] = options.tensor_parallel_size
        args["gpu_memory_utilization"] = options.gpu_memory_utilization
    return {k: v for k, v in args.items() if v is not None}


class VLLMEngine(Engine):
    """vLLM's `AsyncLLM`, started in-process; its engine core runs in a child process."""

    def __init__(
        self, options: EngineSettings, *, resolve_model: Callable[[], str] | None = None
    ) -> None:
        """`resolve_model`, if given, runs first in `start` (say, to convert weights) and
        returns the model to load in place of `options.model`."""
        self._options = options
        self._resolve_model = resolve_model
        self._llm: AsyncLLM | None = None
        self._tokenizer: VLLMTokenizer | None = None
        self._model_info: ModelInfo | None = None
        self._make_params: Any = None

    async def start(self) -> None:
        await asyncio.to_thread(self._start_blocking)

    def _start_blocking(self) -> None:
        began = time.monotonic()
        if self._resolve_model is not None:
            self._options = self._options.model_copy(update={"model": self._resolve_model()})
        from vllm.platforms import current_platform

        on_cpu = current_platform.is_cpu()
        if on_cpu:
            _configure_cpu(self._options)
        from vllm.config import StructuredOutputsConfig
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        args = _engine_args(self._options, on_cpu)
        logger.info("starting vLLM engine (%s): %s", "CPU" if on_cpu else "GPU", args)
        args["structured_outputs_config"] = StructuredOutputsConfig(
            **args["structured_outputs_config"]
        )
        llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
        hf_tokenizer = llm.get_tokenizer()
        self._tokenizer = VLLMTokenizer(hf_tokenizer)
        self._model_info = ModelInfo(
            max_model_len=llm.model_config.max_model_len,
            source=self._options.model or "",
            vocab_size=len(hf_tokenizer),
        )
        self._make_params = _params_factory()
        self._llm = llm
        logger.info("vLLM engine ready in %.1f s", time.monotonic() - began)

    async def stop(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            await asyncio.to_thread(llm.shutdown)

    @property
    def model_info(self) -> ModelInfo:
        if self._model_info is None:
            raise EngineNotReadyError("The engine is still loading the model.")
        return self._model_info

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            raise EngineNotReadyError("The engine is still loading the model.")
        return self._tokenizer

    def _ready_llm(self) -> AsyncLLM:
        if self._llm is None:
            raise EngineNotReadyError("The engine is still loading the model.")
        if self._llm.errored:
            raise EngineDeadError("The engine has stopped; restart the server.")
        return self._llm

    async def check_health(self) -> None:
        self._ready_llm()

    def running_requests(self) -> int:
        return 0 if self._llm is None else self._llm.get_num_unfinished_requests()

    async def abort(self, request_id: str) -> None:
        if self._llm is not None and not self._llm.errored:
            await self._llm.abort(request_id)

    async def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
        from vllm.exceptions import GracefulHTTPError, VLLMClientError
        from vllm.inputs import tokens_input
        from vllm.v1.engine.exceptions import EngineDeadError as VLLMEngineDeadError

        llm = self._ready_llm()
        prompt_tokens = len(prompt_token_ids)
        try:
            async for out in llm.generate(
                # Already tokenized: handed over as engine input, past vLLM's renderer.
                tokens_input(prompt_token_ids),
                self._make_params(options),
                request_id,
            ):
                step = GenerationStep(
                    prompt_tokens=prompt_tokens,
                    finished=out.finished,
                    cached_tokens=out.num_cached_tokens or 0,
                )
                if out.prompt_logprobs is not None and options.prompt_logprobs is not None:
                    step.prompt_logprobs = [
                        None if d is None else _token_logprob(t, d, options.prompt_logprobs)
                        for t, d in zip(prompt_token_ids, out.prompt_logprobs, strict=False)
                    ]
                for c in out.outputs:
                    delta = ChoiceDelta(
                        index=c.index,
                        text=c.text,
                        token_count=len(c.token_ids),
                        finish_reason=_finish_reason(c.finish_reason),
                        stop_reason=c.stop_reason,
                        cumulative_logprob=c.cumulative_logprob,
                    )
                    if options.logprobs is not None and c.logprobs is not None:
                        delta.logprobs = [
                            _token_logprob(t, d, options.logprobs)
                            for t, d in zip(c.token_ids, c.logprobs, strict=False)
                        ]
                    step.choices.append(delta)
                yield step
        except VLLMEngineDeadError as exc:
            raise EngineDeadError("The engine has stopped; restart the server.") from exc
        except GracefulHTTPError as exc:
            raise EngineOverloadedError(exc.message) from exc
        except VLLMClientError as exc:
            raise InvalidRequestError(str(exc), param=getattr(exc, "parameter", None)) from exc


_FINISH_REASONS: dict[str, FinishReason] = {r: r for r in get_args(FinishReason)}


def _finish_reason(reason: str | None) -> FinishReason | None:
    """vLLM's finish reason as ours; one we do not know is reported as a failure."""
    if reason is None:
        return None
    known = _FINISH_REASONS.get(reason)
    if known is None:
        logger.error("unknown finish reason from the engine: %r", reason)
        return "error"
    return known


# JSON has no -inf; vLLM's own server clamps the same way.
_MIN_LOGPROB = -9999.0


def _token_logprob(token_id: int, candidates: Any, top: int) -> TokenLogprob:
    """Our `TokenLogprob` from vLLM's {token id: Logprob} of one position."""
    chosen = candidates[token_id]
    ranked = sorted(candidates.values(), key=lambda lp: lp.rank)[:top]
    return TokenLogprob(
        token=chosen.decoded_token or "",
        logprob=max(chosen.logprob, _MIN_LOGPROB),
        top=tuple((lp.decoded_token or "", max(lp.logprob, _MIN_LOGPROB)) for lp in ranked),
    )


def _params_factory() -> Any:
    """Return a function mapping `SamplingOptions` to vLLM's `SamplingParams`."""
    from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

    def make(o: SamplingOptions) -> SamplingParams:
        temperature, top_k = o.temperature, o.top_k
        if o.n > 1 and temperature == 0:
            # vLLM refuses n > 1 when greedy; OpenAI does not. Keeping only the top token
            # is greedy decoding by another name, and vLLM accepts it with n > 1.
            temperature, top_k = 1.0, 1
        return SamplingParams(
            n=o.n,
            max_tokens=o.max_tokens,
            temperature=temperature,
            top_p=o.top_p,
            top_k=top_k,
            min_p=o.min_p,
            seed=o.seed,
            stop=list(o.stop),
            stop_token_ids=list(o.stop_token_ids),
            presence_penalty=o.presence_penalty,
            frequency_penalty=o.frequency_penalty,
            repetition_penalty=o.repetition_penalty,
            min_tokens=o.min_tokens,
            ignore_eos=o.ignore_eos,
            skip_special_tokens=o.skip_special_tokens,
            logit_bias=o.logit_bias,
            logprobs=o.logprobs,
            prompt_logprobs=o.prompt_logprobs,
            structured_outputs=structured(o.structured),
            output_kind=RequestOutputKind.DELTA,
        )

    def structured(s: StructuredOutput | None) -> StructuredOutputsParams | None:
        if s is None:
            return None
        if s.json_schema is not None:
            return StructuredOutputsParams(json=s.json_schema)
        return StructuredOutputsParams(json_object=True)

    return make
