"""`/v1/completions` (legacy text completions), as OpenAI's spec has it.

Streamed chunks and the whole response share one shape there, and so here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.common import (
    CompletionUsage,
    GenerationRequest,
    ResponseModel,
    TokenCount,
    TokenId,
)

TokenIds = Annotated[list[TokenId], Field(min_length=1)]
Prompt = str | list[str] | TokenIds | list[TokenIds]


class CreateCompletionRequest(GenerationRequest):
    prompt: Prompt | None
    best_of: Annotated[int, Field(ge=0, le=20)] | None = None
    echo: bool | None = False
    logprobs: Annotated[int, Field(ge=0, le=5)] | None = None
    max_tokens: TokenCount = 16
    store: bool | None = None
    suffix: str | None = None


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
