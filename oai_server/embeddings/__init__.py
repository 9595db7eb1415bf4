"""Embeddings: `/v1/embeddings` on an embedding model's own engine, beside the chat model."""

from __future__ import annotations

from fastapi import FastAPI

from oai_server.embeddings.routes import router
from oai_server.embeddings.service import Admit, EmbeddingService
from oai_server.engine.pooling import EmbeddingEngine
from oai_server.generation.work_limits import WorkLimits
from oai_server.observability.metrics import Metrics

__all__ = ["EmbeddingService", "install"]


def install(
    app: FastAPI,
    engine: EmbeddingEngine | None,
    model_name: str,
    limits: WorkLimits,
    admit: Admit | None,
    metrics: Metrics,
) -> EmbeddingService | None:
    """Route `/v1/embeddings` to a service on `engine` (none when no embedding model is
    served: the route then answers which models there are)."""
    service = (
        None if engine is None else EmbeddingService(engine, model_name, limits, admit, metrics)
    )
    app.state.embeddings = service
    app.include_router(router)
    return service
