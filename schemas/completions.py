"""`/v1/completions` (legacy text completions), as OpenAI's spec has it.

Streamed chunks and the whole response share one shape there, and so here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.chat import ResponseFormat
from schemas.common import (
    ChoiceCount,
    CompletionUsage,
    LogitBias,
    Metadata,
    Penalty,
    RequestModel,
    ResponseModel,
    Stop,
    StreamOptions,
    Temperature,
    TokenCount,
    TopP,
)

TokenIds = Annotated[list[int], Field(min_length=1)]
Prompt = str | list[str] | TokenIds | list[TokenIds]


class CreateCompletionRequest(RequestModel):
    model: str
    prompt: Prompt | None
    best_of: Annotated[int, Field(ge=0, le=20)] | None = None
    echo: bool | None = False
    frequency_penalty: Penalty = 0
    presence_penalty: Penalty = 0
    logit_bias: LogitBias = None
    logprobs: Annotated[int, Field(ge=0, le=5)] | None = None
    max_tokens: TokenCount = 16
    n: ChoiceCount = 1
    seed: int | None = None
    stop: Stop = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    suffix: str | None = None
    temperature: Temperature = 1
    top_p: TopP = 1
    user: str | None = None
    metadata: Metadata = None
    store: bool | None = None
    service_tier: str | None = None

    # vLLM's sampling extensions, accepted as `vllm serve` accepts them.
    top_k: int | None = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    min_tokens: Annotated[int, Field(ge=0)] | None = None
    ignore_eos: bool | None = None
    stop_token_ids: list[int] | None = None
    skip_special_tokens: bool | None = None
    response_format: ResponseFormat | None = None


class CompletionLogprobs(ResponseModel):
    text_offset: list[int]
    # None for the first prompt token under `echo`: nothing precedes it (as OpenAI sends).
    token_logprobs: list[float | None]
    tokens: list[str]
    top_logprobs: list[dict[str, float] | None]


class CompletionChoice(ResponseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: Literal["stop", "length", "content_filter"] | None
    stop_reason: str | int | None = None


class CreateCompletionResponse(ResponseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: CompletionUsage | None = None
    system_fingerprint: str | None = None
