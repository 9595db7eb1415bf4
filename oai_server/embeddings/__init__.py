"""Embeddings: `/v1/embeddings` on an embedding model's own engine, beside the chat model.

`service` (validate, embed, answer). The endpoint is the core's (`routes/embeddings.py`):
it answers through the app's answering chain, as chat does. The engine itself
is the core's (`core.embedder`): it loads after the chat engine and is watched like it.
"""

from __future__ import annotations

from oai_server.embeddings.service import EmbeddingService
from oai_server.features import Feature
from oai_server.state import ServerState

__all__ = ["EmbeddingService", "feature"]


def feature(core: ServerState) -> Feature[EmbeddingService | None]:
    """The embeddings service when the core has an embedding engine (else None: the route
    answers which models there are), admitted by the core's admission step (its tokens
    against the caller's limit), as the chat engine's requests are."""
    embedder = core.embedder
    if embedder is None:
        return Feature(None)
    service = EmbeddingService(
        embedder,
        core.models.first("embedding") or "",
        core.chat.limits,
        core.admission,
        core.metrics,
        core.models,
    )
    return Feature(service)
