"""Wire types shared by the chat and completions endpoints.

Conventions, held across all of `schemas/`:

- Request models ignore unknown fields (clients send new ones all the time) and are
  validated strictly from JSON, so `"max_tokens": "5"` is an error, as it is at OpenAI.
- Response models send every field the spec requires, null included (such fields
  have no default here, so they cannot be forgotten). An optional field is left out
  while it is None, unless the server set it to None on purpose: a stream chunk's
  `"usage": null` is sent that way when the client asked for usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field


class RequestModel(BaseModel):
    """Base of request bodies: unknown fields are accepted and ignored."""

    # NaN and infinities are not JSON, and no sampling field means anything by them.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class ResponseModel(BaseModel):
    """Base of response bodies.

    Serialized with `exclude_unset`, entirely in pydantic's compiled core: required
    fields are always set, fields whose default is a value (`object`, `role`) are
    marked set on creation, so only optional fields left at None stay out.
    """

    model_config = ConfigDict(extra="forbid")
    _always_sent: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._always_sent = frozenset(
            name
            for name, f in cls.model_fields.items()
            if not f.is_required() and f.default is not None
        )

    def model_post_init(self, context: Any, /) -> None:
        if self._always_sent:
            self.__pydantic_fields_set__.update(self._always_sent)

    def to_json(self) -> bytes:
        """Serialize for the wire."""
        return self.__pydantic_serializer__.to_json(self, exclude_unset=True)


def by_type(tags: Mapping[str, str]) -> Any:
    """A discriminator on `type` whose tags (`tags[type]`) are class names, so an error's
    location names fields only (`tools[0].function`, not `tools[0].function.function`)."""

    def tag(value: Any) -> str | None:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        return tags.get(kind, kind) if isinstance(kind, str) else None

    kinds = " or ".join(f"'{kind}'" for kind in tags)
    return Discriminator(
        tag,
        custom_error_type="invalid_union_member",
        custom_error_message=f"'type' must be {kinds}",
    )


class StreamOptions(RequestModel):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None
    # vLLM extension: usage on every chunk, not only the last.
    continuous_usage_stats: bool | None = None


Stop = str | Annotated[list[str], Field(min_length=1, max_length=4)] | None

# `logit_bias` maps token ids (as JSON object keys) to a bias in [-100, 100].
LogitBias = dict[str, Annotated[float, Field(ge=-100, le=100)]] | None

Penalty = Annotated[float, Field(ge=-2, le=2)] | None
Temperature = Annotated[float, Field(ge=0, le=2)] | None
TopP = Annotated[float, Field(ge=0, le=1)] | None
ChoiceCount = Annotated[int, Field(ge=1, le=128)] | None

# Integers that reach the engine end up in 32- or 64-bit fields there: a larger one is
# a client's error (400), never an overflow inside the engine (500).
INT32_MAX = 2**31 - 1
TokenCount = Annotated[int, Field(ge=0, le=INT32_MAX)] | None
TokenId = Annotated[int, Field(ge=0, le=INT32_MAX)]
# OpenAI's `seed` is a 64-bit signed integer.
Seed = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)] | None
# vLLM's `top_k`: -1 or 0 turn it off; a value past the vocabulary keeps every token.
TopK = Annotated[int, Field(ge=-1, le=INT32_MAX)] | None
Metadata = dict[str, str] | None


class PromptTokensDetails(ResponseModel):
    cached_tokens: int = 0
    audio_tokens: int = 0


class CompletionTokensDetails(ResponseModel):
    reasoning_tokens: int = 0
    audio_tokens: int = 0
    accepted_prediction_tokens: int = 0
    rejected_prediction_tokens: int = 0


class CompletionUsage(ResponseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None


class ErrorObject(ResponseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(ResponseModel):
    error: ErrorObject


class Model(ResponseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    # vLLM extensions that tools built for vLLM read.
    root: str | None = None
    # The model this one adapts (a LoRA adapter's base), as vLLM lists it.
    parent: str | None = None
    max_model_len: int | None = None
    # What a chat model takes: ["text"], or ["text", "image"] for a vision model.
    input_modalities: list[Literal["text", "image"]] | None = None
    # What the model serves, in vLLM's task names: "generate" (chat and completions),
    # "embed" (embeddings), "classify" (/classify), "score" (score and rerank).
    supported_tasks: list[Literal["generate", "embed", "classify", "score"]] | None = None


class ListModelsResponse(ResponseModel):
    object: Literal["list"] = "list"
    data: list[Model]


class ResponseFormat(RequestModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


# vLLM refuses these characters in a salt.
CacheSalt = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^@/\\\x00]*$")]


# OpenAI's tiers (`ServiceTier`); `fast` is an alias of `priority`.
ServiceTier = Literal["auto", "default", "flex", "scale", "priority", "fast"]


class GenerationRequest(RequestModel):
    """The fields the chat and completions requests share: model, sampling, streaming."""

    model: str
    frequency_penalty: Penalty = 0
    presence_penalty: Penalty = 0
    logit_bias: LogitBias = None
    n: ChoiceCount = 1
    seed: Seed = None
    stop: Stop = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    # None when left out: the server then applies the model's own default (else OpenAI's 1).
    temperature: Temperature = None
    top_p: TopP = None
    user: str | None = None
    metadata: Metadata = None
    service_tier: ServiceTier | None = None
    response_format: ResponseFormat | None = None

    # vLLM's sampling extensions, accepted as `vllm serve` accepts them.
    top_k: TopK = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    min_tokens: TokenCount = None
    ignore_eos: bool | None = None
    stop_token_ids: list[TokenId] | None = None
    skip_special_tokens: bool | None = None
    # vLLM's scheduling extension: lower runs first under `--scheduling-policy priority`.
    priority: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)] | None = None
    # vLLM's prefix-cache extension: requests share cached blocks only with the same salt
    # (the server prefixes the caller's key id, hence at most 100 of vLLM's 128 characters).
    cache_salt: CacheSalt | None = None
