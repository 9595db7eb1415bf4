"""Rerank and score in the response cache.

A score is determined by its texts alone, so every request is cacheable while the cache is
on. The key covers the model asked for, the token ids of every text (truncation included),
where the first side ends (a cross-encoder's pairs: where each second text begins), and for
a rerank `top_n` and `return_documents`. An entry holds the answer's results (or scores),
one event each, without the documents' texts: a hit takes them from its own request, so an
uncased model's "Paris" and "paris" (the same tokens) each get their own text back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oai_server.cache.endpoints import Endpoint, Event
from oai_server.generation.engine_request import Usage
from oai_server.rerank.service import ScoreCall, ScoreJob, ScoringRequest, ScoringService
from schemas.common import ResponseModel
from schemas.rerank import (
    ClassificationData,
    ClassificationRequest,
    ClassificationResponse,
    RerankDocument,
    RerankResponse,
    RerankResult,
    RerankUsage,
    ScoreData,
    ScoreRequest,
    ScoreResponse,
    ScoreUsage,
    text_of,
)


class ScoringEndpoint(Endpoint[ScoringRequest, ScoreJob, ScoreCall]):
    kind = "score"
    id_prefix = "score"
    service: ScoringService

    def __init__(self, service: ScoringService) -> None:
        self.service = service

    def cacheable(self, req: ScoringRequest, job: ScoreJob) -> bool:
        return True  # nothing is sampled

    def prompts(self, job: ScoreJob) -> list[list[int]]:
        return job.prompts

    def key_material(self, req: ScoringRequest, job: ScoreJob) -> dict[str, Any]:
        # A cross-encoder's prompts are pairs (`first` 0): where each one's second begins.
        material: dict[str, Any] = {"model": req.model, "first": job.first}
        if job.second_from:
            material["types"] = job.second_from
        if isinstance(req, ClassificationRequest):
            material["classify"] = True
        elif not isinstance(req, ScoreRequest):
            material.update(rerank=True, top_n=req.top_n, documents=req.return_documents)
        return material

    def usage(self, handle: ScoreCall) -> Usage:
        return Usage(prompt_tokens=handle.job.prompt_tokens)

    def identity(self, handle: ScoreCall) -> tuple[str, int]:
        return handle.request_id, 0

    def whole_only(self, job: ScoreJob) -> bool:
        return True

    def whole_events(self, whole: ResponseModel) -> list[Event]:
        if isinstance(whole, ClassificationResponse):
            return list(whole.data)
        if isinstance(whole, RerankResponse):
            return [
                RerankResult(index=r.index, relevance_score=r.relevance_score)
                for r in whole.results
            ]
        assert isinstance(whole, ScoreResponse)
        return list(whole.data)

    def whole_usage(self, whole: ResponseModel) -> Usage | None:
        assert isinstance(whole, RerankResponse | ScoreResponse | ClassificationResponse)
        return Usage(prompt_tokens=whole.usage.prompt_tokens)

    def restore(self, stored: dict[str, Any]) -> ResponseModel:
        if "relevance_score" in stored:
            return RerankResult.model_validate(stored)
        if "probs" in stored:
            return ClassificationData.model_validate(stored)
        return ScoreData.model_validate(stored)

    def assemble(
        self,
        req: ScoringRequest,
        events: Sequence[Event],
        usage: Usage,
        id_: str,
        created: int,
    ) -> ResponseModel:
        tokens = usage.prompt_tokens
        model = self.service.model_name  # as a miss names it
        if isinstance(req, ClassificationRequest):
            return ClassificationResponse(
                id=id_,
                created=created,
                model=model,
                data=[event for event in events if isinstance(event, ClassificationData)],
                usage=ScoreUsage(prompt_tokens=tokens, total_tokens=tokens),
            )
        if isinstance(req, ScoreRequest):
            return ScoreResponse(
                id=id_,
                created=created,
                model=model,
                data=[event for event in events if isinstance(event, ScoreData)],
                usage=ScoreUsage(prompt_tokens=tokens, total_tokens=tokens),
            )
        documents = req.document_list
        results = [event for event in events if isinstance(event, RerankResult)]
        if req.return_documents:
            results = [
                r.model_copy(update={"document": RerankDocument(text=text_of(documents[r.index]))})
                for r in results
            ]
        return RerankResponse(
            id=id_,
            model=model,
            results=results,
            usage=RerankUsage(prompt_tokens=tokens, total_tokens=tokens),
        )
