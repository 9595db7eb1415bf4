"""The `Engine` interface over vLLM's `AsyncLLM`: the only module that imports vllm.

vllm is imported lazily, in `start`, so the server (and its tests with the fake
engine) import fast and without vllm installed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, get_args

from oai_server.engine.lora import check_adapter
from oai_server.engine.protocol import Engine, check_priority
from oai_server.engine.settings import EngineSettings
from oai_server.engine.types import (
    ChoiceDelta,
    FinishReason,
    GenerationStep,
    ImageInput,
    ModelInfo,
    SamplingDefaults,
    SamplingOptions,
    StructuredOutput,
    TokenLogprob,
)
from oai_server.engine.vllm import args as vllm_args
from oai_server.engine.vllm import cpu, lora_ops
from oai_server.engine.vllm import flags as vllm_flags
from oai_server.engine.vllm.holder import AsyncLLMHolder, engine_processes
from oai_server.engine.vllm.lora import VLLMAdapters
from oai_server.engine.vllm.multimodal import image_limit, image_placeholder, with_images
from oai_server.errors import (
    EngineDeadError,
    EngineNotReadyError,
    EngineOverloadedError,
    InvalidRequestError,
)

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


def sampling_defaults(
    params: dict[str, Any], generation_config: str, override: dict[str, int | float]
) -> SamplingDefaults:
    """The model's defaults from vLLM's `get_diff_sampling_param()`, with the bound on every
    request's max_tokens that `vllm serve` keeps beside them: the config's own
    `max_new_tokens` when --generation-config names a directory, else the override's."""
    defaults = SamplingDefaults.of(params)
    if generation_config in ("auto", "vllm"):
        cap = override.get("max_new_tokens")
    else:
        cap = defaults.max_tokens
    return dataclasses.replace(defaults, max_tokens_cap=None if cap is None else int(cap))


class VLLMEngine(AsyncLLMHolder, Engine):
    """vLLM's `AsyncLLM`, started in-process; its engine core runs in a child process."""

    def __init__(
        self,
        options: EngineSettings,
        *,
        resolve_model: Callable[[str], str] | None = None,
        served_model_name: str | None = None,
        log_stats: bool = True,
        tokens_as_ids: bool = False,
    ) -> None:
        """`resolve_model`, if given, is the embedded model: it runs first in `start` with
        the dtype chosen for this CPU (to convert the weights at that precision) and
        returns the model to load in place of `options.model`. `served_model_name` is the
        id clients use, which vLLM's own metrics are labelled with; `log_stats` False
        keeps this engine off them (one engine per process may feed them). `tokens_as_ids`
        (`--return-tokens-as-token-ids`) names each logprob's token `token_id:N`, as vLLM
        does, for tokens that are no whole UTF-8 text."""
        super().__init__()
        self._tokens_as_ids = tokens_as_ids
        # vLLM's `token_id:N` namer, set at start when `tokens_as_ids`.
        self._id_name: Callable[[int], str] | None = None
        self._log_stats = log_stats
        self._options = options
        self._served_model_name = served_model_name
        self._resolve_model = resolve_model
        self._model_info: ModelInfo | None = None
        self._make_params: Any = None
        # The CPU kernels and dtype chosen at start (None on GPU).
        self.plan: cpu.KernelPlan | None = None
        self._adapters = VLLMAdapters()
        self._lora_slot_fix = False

    async def start(self) -> None:
        await asyncio.to_thread(self._start_blocking)
        llm = self._ready_llm()
        if self._options.lora_enabled and self.plan is not None:
            await self._fix_base_model_lora_slot(llm)
        for name, path in self._options.lora_paths().items():
            check_adapter(path, self._options.max_lora_rank, param="lora_modules")
            await self.load_adapter(name, path)

    async def _fix_base_model_lora_slot(self, llm: Any) -> None:
        """On CPU, keep base-model tokens off vLLM's last LoRA slot: by its ops, fixed in the
        engine core (lora_ops.py), else by the null adapter (lora.py)."""
        if self._lora_slot_fix:
            try:
                fixed = await llm.collective_rpc("oai_mask_unset_lora_slot")
            except Exception as exc:  # noqa: BLE001 - any failure there means: not fixed
                logger.debug("the LoRA slot fix failed in the engine core: %s", exc)
                fixed = [False]
            if fixed and all(fixed):
                return
            logger.warning(
                "LoRA on CPU: vLLM's LoRA ops could not be fixed in the engine core; "
                "base-model requests carry a null adapter, which takes one of the "
                "--max-loras slots"
            )
        else:
            logger.warning(
                "LoRA on CPU: this vLLM's LoRA ops are not the ones oai-server can fix; "
                "base-model requests carry a null adapter (slower)"
            )
        await self._adapters.add_null_adapter(llm, llm.model_config.hf_config)

    async def count_prompt_tokens(
        self, prompt_token_ids: list[int], images: Sequence[ImageInput]
    ) -> int:
        if not images:
            return len(prompt_token_ids)
        engine_input = await with_images(self._ready_llm(), prompt_token_ids, images, counting=True)
        return len(engine_input["prompt_token_ids"])

    async def load_adapter(self, name: str, path: str) -> None:
        llm = self._ready_llm()
        if not self._options.lora_enabled:
            raise InvalidRequestError(
                "This server was started without LoRA (--enable-lora).", param="lora_path"
            )
        await self._adapters.load(llm, name, path)

    async def unload_adapter(self, name: str) -> None:
        await self._adapters.unload(self._llm, name)

    def _start_blocking(self) -> None:
        began = time.monotonic()
        from vllm.platforms import current_platform

        on_cpu = current_platform.is_cpu()
        embedded = self._resolve_model is not None
        if on_cpu:
            plan = cpu.plan_kernels(self._options.dtype, embedded=embedded, flags=cpu.cpu_flags())
            self._options = self._options.model_copy(update={"dtype": plan.dtype})
            self.plan = plan
            logger.info("CPU engine: %s (%s)", plan.describe(), plan.reason)
            if embedded and plan.attention == "amx":
                logger.warning(
                    "the embedded model was seen answering wrong on vLLM's AMX bfloat16 "
                    "kernels; --dtype float32 (its default on AMX) answers right"
                )
        if self._resolve_model is not None:
            dtype = "bfloat16" if self._options.dtype == "auto" else self._options.dtype
            self._options = self._options.model_copy(update={"model": self._resolve_model(dtype)})
        preload: str | None = None
        if on_cpu:
            vllm_args.configure_cpu(self._options)
            preload = vllm_args.preload_for(self._options)
        from vllm.config import StructuredOutputsConfig
        from vllm.v1.engine.async_llm import AsyncLLM

        self._lora_slot_fix = on_cpu and self._options.lora_enabled and lora_ops.patchable()
        args = vllm_args.engine_args(
            self._options, on_cpu, self._served_model_name, lora_slot_fix=self._lora_slot_fix
        )
        if not self._log_stats:
            args["disable_log_stats"] = True
        logger.debug("starting vLLM engine (%s): %s", "CPU" if on_cpu else "GPU", args)
        logger.info("loading the engine (%s)", "CPU" if on_cpu else "GPU")
        if isinstance(args["structured_outputs_config"], dict):  # else the user's own
            args["structured_outputs_config"] = StructuredOutputsConfig(
                **args["structured_outputs_config"]
            )
        known = {p.pid for p in engine_processes()}
        with vllm_args.environment("LD_PRELOAD", preload):
            # The engine core is spawned here and reads LD_PRELOAD when it starts.
            llm = AsyncLLM.from_engine_args(vllm_flags.async_engine_args(args))
        self._model_info = ModelInfo(
            max_model_len=llm.model_config.max_model_len,
            source=self._options.model or "",
            vocab_size=len(llm.get_tokenizer()),
            dtype=str(llm.model_config.dtype).removeprefix("torch."),
            kernels=None if self.plan is None else self.plan.describe(),
            sampling_defaults=sampling_defaults(
                llm.model_config.get_diff_sampling_param(),
                self._options.generation_config,
                self._options.override_generation_config,
            ),
            image_limit=image_limit(llm.model_config),
            architectures=tuple(llm.model_config.architectures or ()),
        )
        defaults = self._model_info.sampling_defaults.described()
        if defaults:
            logger.info("sampling defaults from the model's generation config: %s", defaults)
        self._make_params = _params_factory()
        if self._tokens_as_ids:
            from vllm.entrypoints.generate.base.serving import format_token_id_placeholder

            self._id_name = format_token_id_placeholder
        self._hold(llm, known, image_placeholder(llm.model_config))
        # vLLM keeps an import error for good (vllm.multimodal.media.audio's
        # `_torchcodec_import_exc`, raised while this frame imported vllm); its traceback
        # holds, through each frame's f_back, this frame and its locals for the life of the
        # process. Holding `llm` here would keep the engine alive past `stop` until
        # interpreter exit, where its __del__ calls vLLM globals already set to None.
        del llm
        logger.debug("vLLM engine ready in %.1f s", time.monotonic() - began)

    async def stop(self) -> None:
        await super().stop()
        self._adapters.close()

    @property
    def model_info(self) -> ModelInfo:
        if self._model_info is None:
            raise EngineNotReadyError("The engine is still loading the model.")
        return self._model_info

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
        check_priority(options, self._options.scheduling_policy)
        lora_request = self._adapters.request_for(options.adapter)
        prompt_tokens = len(prompt_token_ids)
        first = True
        try:
            if options.images:
                engine_input: Any = await with_images(
                    llm, prompt_token_ids, options.images, options.cache_salt
                )
            else:
                # Already tokenized: handed over as engine input, past vLLM's renderer.
                engine_input = tokens_input(prompt_token_ids, cache_salt=options.cache_salt)
            async for out in llm.generate(
                engine_input,
                self._make_params(options),
                request_id,
                lora_request=lora_request,
                priority=options.priority,
            ):
                if first and out.prompt_token_ids is not None:
                    # With images, the engine's processor expanded each placeholder.
                    prompt_tokens = len(out.prompt_token_ids)
                step = GenerationStep(
                    prompt_tokens=prompt_tokens,
                    finished=out.finished,
                    cached_tokens=out.num_cached_tokens or 0,
                )
                if first:
                    first = False
                    step.queue_time = _queue_time(out.metrics)
                    step.prefill_time = _prefill_time(out.metrics)
                if out.prompt_logprobs is not None and options.prompt_logprobs is not None:
                    step.prompt_logprobs = [
                        None
                        if d is None
                        else _token_logprob(t, d, options.prompt_logprobs, self._id_name)
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
                        token_ids=c.token_ids,
                    )
                    if options.logprobs is not None and c.logprobs is not None:
                        delta.logprobs = [
                            _token_logprob(t, d, options.logprobs, self._id_name)
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


def _queue_time(stats: Any) -> float | None:
    """Seconds between queued and scheduled, from vLLM's per-request stats when kept."""
    queued = getattr(stats, "queued_ts", 0.0)
    scheduled = getattr(stats, "scheduled_ts", 0.0)
    if not queued or not scheduled:
        return None
    return max(0.0, float(scheduled - queued))


def _prefill_time(stats: Any) -> float | None:
    """Seconds between scheduled and the first token, from vLLM's per-request stats."""
    scheduled = getattr(stats, "scheduled_ts", 0.0)
    first = getattr(stats, "first_token_ts", 0.0)
    if not scheduled or not first:
        return None
    return max(0.0, float(first - scheduled))


# JSON has no -inf; vLLM's own server clamps the same way.
_MIN_LOGPROB = -9999.0


def _token_logprob(
    token_id: int, candidates: Any, top: int, id_name: Callable[[int], str] | None = None
) -> TokenLogprob:
    """Our `TokenLogprob` from vLLM's {token id: Logprob} of one position; each token
    named by `id_name(token id)` when given, else by its text."""
    chosen = candidates[token_id]
    ranked = sorted(candidates.items(), key=lambda item: item[1].rank)[:top]
    if id_name is None:
        return TokenLogprob(
            token=chosen.decoded_token or "",
            logprob=max(chosen.logprob, _MIN_LOGPROB),
            top=tuple((lp.decoded_token or "", max(lp.logprob, _MIN_LOGPROB)) for _, lp in ranked),
        )
    return TokenLogprob(
        token=id_name(token_id),
        logprob=max(chosen.logprob, _MIN_LOGPROB),
        top=tuple((id_name(t), max(lp.logprob, _MIN_LOGPROB)) for t, lp in ranked),
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
        if s.grammar is not None:
            return StructuredOutputsParams(grammar=s.grammar)
        if s.regex is not None:
            return StructuredOutputsParams(regex=s.regex)
        return StructuredOutputsParams(json_object=True)

    return make
