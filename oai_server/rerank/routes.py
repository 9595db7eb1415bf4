"""`POST /v1/rerank`, `/rerank`, `/v2/rerank`, `/v1/score`, `/score` and `/classify`: the
paths `vllm serve` answers them on (Jina's rerank shape on the first two, Cohere's v2 on
the third)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response

from oai_server.errors import InvalidRequestError
from oai_server.http.answer import GenerationService, answer
from oai_server.http.parsing import parse_body
from oai_server.models import ModelRegistry
from oai_server.rerank.service import SERVES, ScoringRequest
from schemas.rerank import ClassificationRequest, RerankRequest, ScoreRequest

RERANK_PATHS = ("/v1/rerank", "/rerank", "/v2/rerank")
SCORE_PATHS = ("/v1/score", "/score")

# The service that answers one request (through the response cache when it is on); None:
# this server serves no embedding model.
Answerer = Callable[[Request], GenerationService[ScoringRequest, Any, Any] | None]


def router(answerer: Answerer, models: ModelRegistry, max_bytes: int) -> APIRouter:
    """The routes, answering through `answerer`."""
    router = APIRouter()

    async def scoring(request: Request, schema: type[ScoringRequest]) -> Response:
        req = await parse_body(request, schema, max_bytes)
        service = answerer(request)
        if service is None:
            if req.model is not None:
                models.find(req.model, "embedding", wanted=SERVES)  # a 4xx naming the models
            raise InvalidRequestError(
                "This server serves no embedding model to rerank or score with.", param="model"
            )
        return await answer(request, req, service)

    async def rerank(request: Request) -> Response:
        return await scoring(request, RerankRequest)

    async def score(request: Request) -> Response:
        return await scoring(request, ScoreRequest)

    async def classify(request: Request) -> Response:
        return await scoring(request, ClassificationRequest)

    router.add_api_route("/classify", classify, methods=["POST"])
    for path in RERANK_PATHS:
        router.add_api_route(path, rerank, methods=["POST"])
    for path in SCORE_PATHS:
        router.add_api_route(path, score, methods=["POST"])
    return router
