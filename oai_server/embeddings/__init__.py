"""Embeddings: `/v1/embeddings` on an embedding model's own engine, beside the chat model.

`service` (validate, embed, answer), `routes` (the endpoint). The engine itself is the
core's (`state.embedder`): it loads after the chat engine and is watched like it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oai_server.embeddings.routes import router
from oai_server.embeddings.service import EmbeddingService
from oai_server.features import Feature

if TYPE_CHECKING:
    from oai_server.state import ServerState

__all__ = ["EmbeddingService", "feature"]


def feature(state: ServerState) -> Feature[EmbeddingService | None]:
    """`/v1/embeddings`, served when the state has an embedding engine (else the route
    answers which models there are); its tokens reserved against the caller's limit."""
    embedder, limiter = state.embedder, state.limiter
    service = None
    if embedder is not None:
        service = EmbeddingService(
            embedder,
            state.models.first("embedding") or "",
            state.chat.limits,
            None if limiter is None or limiter.tpm is None else limiter.reserve_tokens,
            state.metrics,
            state.models,
        )
    return Feature(service, router.routes)
