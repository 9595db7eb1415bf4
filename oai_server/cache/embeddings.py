"""`/v1/embeddings` in the response cache.

An embedding is determined by its input alone, so every request is cacheable while the
cache is on. The key covers the model asked for, each input's token ids (so a text and
its token ids share an entry), `encoding_format` and `dimensions`; whose entries a
request sees is the same per-key scope as chat's. The answer is always whole: an entry
holds its `data` items, one event each, and the tokens of its inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oai_server.cache.endpoints import Endpoint, Event
from oai_server.embeddings.service import EmbeddingCall, EmbeddingJob, EmbeddingService
from oai_server.generation.engine_request import Usage
from schemas.common import ResponseModel
from schemas.embeddings import (
    CreateEmbeddingRequest,
    CreateEmbeddingResponse,
    Embedding,
    EmbeddingUsage,
)


def _usage(prompt_tokens: int) -> Usage:
    """An embedding answer's usage in the cache's terms: prompt tokens, nothing generated."""
    return Usage(prompt_tokens=prompt_tokens)


class EmbeddingsEndpoint(Endpoint[CreateEmbeddingRequest, EmbeddingJob, EmbeddingCall]):
    kind = "embeddings"
    id_prefix = "embd"
    service: EmbeddingService

    def __init__(self, service: EmbeddingService) -> None:
        self.service = service

    def cacheable(self, req: CreateEmbeddingRequest, job: EmbeddingJob) -> bool:
        return True  # nothing is sampled

    def prompts(self, job: EmbeddingJob) -> list[list[int]]:
        return job.prompts

    def key_material(self, req: CreateEmbeddingRequest, job: EmbeddingJob) -> dict[str, Any]:
        return {
            "model": req.model,
            "encoding_format": req.encoding_format,
            "dimensions": req.dimensions,
        }

    def usage(self, handle: EmbeddingCall) -> Usage:
        return _usage(handle.job.prompt_tokens)

    def identity(self, handle: EmbeddingCall) -> tuple[str, int]:
        return handle.request_id, 0  # an embedding answer has neither

    def whole_only(self, job: EmbeddingJob) -> bool:
        return True

    def whole_events(self, whole: ResponseModel) -> list[Event]:
        assert isinstance(whole, CreateEmbeddingResponse)
        return list(whole.data)

    def whole_usage(self, whole: ResponseModel) -> Usage | None:
        assert isinstance(whole, CreateEmbeddingResponse)
        return _usage(whole.usage.prompt_tokens)

    def restore(self, stored: dict[str, Any]) -> ResponseModel:
        return Embedding.model_validate(stored)

    def assemble(
        self,
        req: CreateEmbeddingRequest,
        events: Sequence[Event],
        usage: Usage,
        id_: str,
        created: int,
    ) -> ResponseModel:
        data = [event for event in events if isinstance(event, Embedding)]
        tokens = usage.prompt_tokens
        return CreateEmbeddingResponse(
            data=data,
            model=self.service.model_name,  # as a miss names it
            usage=EmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens),
        )
