"""Engine-neutral data passed between the server and an engine.

These types are the whole vocabulary of the engine boundary: the server builds a
`SamplingOptions` and a list of prompt token ids, and reads back `GenerationStep`s.
Nothing here knows about HTTP or about vLLM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# Why a choice ended, in vLLM's words: a stop string or token, the length limit, an abort
# (ours, or the engine's), a failure inside the engine, or a detected repetition loop.
FinishReason = Literal["stop", "length", "abort", "error", "repetition"]


@dataclass(frozen=True, slots=True)
class StructuredOutput:
    """Constrain decoding: to JSON matching `json_schema`, to any JSON object, to a Lark
    `grammar` or to a `regex` (a custom tool's input format)."""

    json_schema: dict[str, Any] | None = None
    json_object: bool = False
    grammar: str | None = None
    regex: str | None = None


@dataclass(frozen=True, slots=True)
class ImageInput:
    """One image of a prompt, decoded: its pixels for the model's own processor (in the
    engine), its digest for everything that compares images (the engine's multimodal
    cache and prefix cache, the response cache's key, stored references)."""

    # sha256 of the image's bytes, hex.
    digest: str
    # The bytes' length.
    size: int
    # The decoded image (a `PIL.Image.Image`), as the engine's processor takes it.
    pixels: Any = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class SamplingDefaults:
    """The model's own sampling defaults (its `generation_config.json`, as `vllm serve` reads it).

    A field a request leaves out takes the value here; None means OpenAI's default.
    """

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    # The config's `max_new_tokens`: the output budget of a request that sets none.
    max_tokens: int | None = None
    # A bound on every request's budget, its own max_tokens too: as `vllm serve`, the
    # `max_new_tokens` of --override-generation-config, or of a --generation-config directory.
    max_tokens_cap: int | None = None

    @classmethod
    def of(cls, params: dict[str, Any]) -> SamplingDefaults:
        """From vLLM's `get_diff_sampling_param()` mapping; fields it does not name are ignored."""
        return cls(**{f: params[f] for f in cls.__dataclass_fields__ if f in params})

    def described(self) -> str:
        """The fields set, as `temperature=0.2, top_p=0.9` (empty when none is)."""
        return ", ".join(
            f"{f}={getattr(self, f)}"
            for f in self.__dataclass_fields__
            if getattr(self, f) is not None
        )


@dataclass(frozen=True, slots=True)
class SamplingOptions:
    """What to generate: OpenAI's sampling fields plus vLLM's common extensions."""

    max_tokens: int
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    logit_bias: dict[int, float] | None = None
    # Return the sampled token's logprob and this many alternatives (None: no logprobs).
    logprobs: int | None = None
    # Same for every prompt token (None: none), for `echo` with logprobs.
    prompt_logprobs: int | None = None
    structured: StructuredOutput | None = None
    # Lower is scheduled first, when the engine schedules by priority.
    priority: int = 0
    # The service tier the request is served at (`oai_server.generation.service_tier`),
    # which its usage is counted under; the engine itself schedules by `priority`.
    service_tier: str = "default"
    # Prefix-cache blocks are shared only between requests of the same salt (None: unsalted).
    cache_salt: str | None = None
    # The LoRA adapter to answer with, by its served name; None: the base model.
    adapter: str | None = None
    # The served chat model whose engine answers (an adapter's base); None: the first.
    model: str | None = None
    # The prompt's images, in the order of their placeholders in the prompt's tokens.
    images: tuple[ImageInput, ...] = ()


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One position's token with its logprob, and the most likely alternatives."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(slots=True)
class TextDelta:
    """One choice's next text, and nothing else: most of what a stream carries.

    Not frozen, though nothing changes one: a frozen dataclass is built through
    `object.__setattr__`, two and a half times the cost, once per streamed chunk.
    """

    index: int
    text: str


@dataclass(slots=True)
class ChoiceDelta(TextDelta):
    """New output of one choice since the previous step.

    A `TextDelta` itself: a step's plain text is streamed as the engine's delta, no new
    object per token.
    """

    token_count: int
    finish_reason: FinishReason | None = None
    # The stop string or token id that ended the choice, when one did.
    stop_reason: str | int | None = None
    # One entry per new token, when logprobs were asked for.
    logprobs: list[TokenLogprob] | None = None
    # Sum of the logprobs of every token so far (for choosing among `best_of`).
    cumulative_logprob: float | None = None
    # The new tokens' ids, where the engine gives them (vLLM's reasoning and tool-call
    # parsers read them).
    token_ids: Sequence[int] = ()


@dataclass(slots=True)
class GenerationStep:
    """One engine iteration's worth of output for a request (only choices that moved)."""

    prompt_tokens: int
    choices: list[ChoiceDelta] = field(default_factory=list)
    finished: bool = False
    # Prompt tokens the engine's prefix cache already held (known once scheduled).
    cached_tokens: int = 0
    # On the first step only, when prompt logprobs were asked for: one entry per prompt
    # token, None for the first (nothing precedes it).
    prompt_logprobs: list[TokenLogprob | None] | None = None
    # On the first step, when the engine knows it: seconds the request waited in its
    # queue before it was scheduled.
    queue_time: float | None = None
    # On the first step, when the engine knows it: seconds from scheduled to the first
    # token (the prompt's prefill).
    prefill_time: float | None = None


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the server needs to know about the loaded model."""

    max_model_len: int
    # Where the weights came from: a local directory or a hub id.
    source: str
    # Token ids run from 0 to vocab_size - 1 (added tokens included).
    vocab_size: int
    # What the engine computes in ("bfloat16", "float32", ...), and on what kernels.
    dtype: str | None = None
    kernels: str | None = None
    # What a request that leaves sampling fields out gets (--generation-config).
    sampling_defaults: SamplingDefaults = field(default_factory=SamplingDefaults)
    # Images one prompt may carry (--limit-mm-per-prompt); 0: the model takes none.
    image_limit: int = 0
    # The model's architectures, as its config names them (`LlamaForCausalLM`, ...).
    architectures: tuple[str, ...] = ()
