"""The Usage API's pages: `GET /v1/organization/usage/completions` and `.../embeddings`.

A page of time buckets, each with one result per group (`group_by`); the fields a query
does not group by are null, as OpenAI sends them.
"""

from __future__ import annotations

from typing import Literal

from schemas.common import ResponseModel


class UsageCompletionsResult(ResponseModel):
    object: Literal["organization.usage.completions.result"] = (
        "organization.usage.completions.result"
    )
    input_tokens: int
    input_cached_tokens: int
    input_uncached_tokens: int
    output_tokens: int
    input_text_tokens: int
    output_text_tokens: int
    input_cached_text_tokens: int
    num_model_requests: int
    project_id: str | None
    user_id: str | None
    api_key_id: str | None
    model: str | None
    batch: bool | None
    service_tier: str | None


class UsageEmbeddingsResult(ResponseModel):
    object: Literal["organization.usage.embeddings.result"] = "organization.usage.embeddings.result"
    input_tokens: int
    num_model_requests: int
    project_id: str | None
    user_id: str | None
    api_key_id: str | None
    model: str | None


class UsageTimeBucket(ResponseModel):
    object: Literal["bucket"] = "bucket"
    start_time: int
    end_time: int
    results: list[UsageCompletionsResult] | list[UsageEmbeddingsResult]


class UsageResponse(ResponseModel):
    object: Literal["page"] = "page"
    data: list[UsageTimeBucket]
    has_more: bool
    next_page: str | None
