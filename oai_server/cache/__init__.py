"""The response cache: repeated deterministic requests answered without the engine.

Off unless `--response-cache` names a backend: `memory` (this process, LRU bounded in
bytes), `redis` (the `--redis-url` every replica shares) or a `redis://` URL of its own.
See `response_cache` for what is cached and how a hit is replayed.
"""

from __future__ import annotations

from oai_server.cache.backend import CacheBackend
from oai_server.cache.embeddings import EmbeddingsEndpoint
from oai_server.cache.endpoints import ChatEndpoint, CompletionsEndpoint
from oai_server.cache.memory import MemoryBackend
from oai_server.cache.metrics import CacheMetrics
from oai_server.cache.redis_backend import RedisBackend
from oai_server.cache.response_cache import ResponseCache
from oai_server.cache.service import CachedService
from oai_server.embeddings.service import EmbeddingService
from oai_server.features import Feature
from oai_server.state import ServerState

__all__ = ["CachedService", "ResponseCache", "feature"]


def feature(
    core: ServerState, embeddings: EmbeddingService | None
) -> Feature[ResponseCache | None]:
    """The cache the settings ask for (None when it is off), for chat, completions and
    `embeddings` (None: no embedding model); its connections closed at the end."""
    cache = _build(core, embeddings)
    return Feature(cache, stop=None if cache is None else cache.close)


def _build(core: ServerState, embeddings: EmbeddingService | None) -> ResponseCache | None:
    """A Redis other than the rate limits' is a dependency of its own (`response_cache`)."""
    settings = core.settings
    if settings.response_cache == "off":
        return None
    metrics = CacheMetrics(core.metrics.registry)
    backend: CacheBackend
    redis_url = settings.response_cache_redis
    if redis_url is None:
        backend = MemoryBackend(
            settings.response_cache_max_bytes, settings.response_cache_ttl, metrics
        )
    else:
        name = "redis" if redis_url == settings.redis_url else "response_cache"
        backend = RedisBackend(
            redis_url, settings.response_cache_ttl, metrics, core.dependencies, name=name
        )
    return ResponseCache(
        backend,
        metrics,
        ChatEndpoint(core.chat),
        CompletionsEndpoint(core.completions),
        None if embeddings is None else EmbeddingsEndpoint(embeddings),
        shared=settings.response_cache_shared,
    )
