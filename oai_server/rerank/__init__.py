"""Rerank and score: `vllm serve`'s pooling endpoints, on the embedding model's engine.

`service` (validate, embed each text, score each pair by cosine similarity, answer),
`cache` (its part in the response cache), `routes` (the paths). The engine is the core's
(`core.embedder`), shared with `/v1/embeddings`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from oai_server.cache import ResponseCache
from oai_server.features import Feature
from oai_server.http.answer import GenerationService
from oai_server.rerank import routes
from oai_server.rerank.cache import ScoringEndpoint
from oai_server.rerank.service import ScoringRequest, ScoringService
from oai_server.state import ServerState

__all__ = ["ScoringService", "feature"]


def feature(core: ServerState, cache: ResponseCache | None) -> Feature[ScoringService | None]:
    """The scoring service when the core has an embedding engine (else None: the routes
    answer which models there are), admitted by the core's admission step (its tokens
    against the caller's limit); `cache`, when on, answers repeated requests."""
    embedder = core.embedder
    service = None
    if embedder is not None:
        service = ScoringService(
            embedder,
            core.models.first("embedding") or "",
            core.settings.max_score_documents,
            core.chat.limits,
            core.admission,
            core.metrics,
            core.models,
        )
    endpoint = None if service is None or cache is None else ScoringEndpoint(service)

    def answerer(request: Request) -> GenerationService[ScoringRequest, Any, Any] | None:
        if cache is not None and endpoint is not None:
            return cache.serving(request, endpoint)
        return service

    settings = core.settings
    router = routes.router(answerer, core.models, settings.max_request_bytes)
    return Feature(service, routes=router.routes)
