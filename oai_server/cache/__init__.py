"""The response cache: repeated deterministic requests answered without the engine.

Off unless `--response-cache` names a backend: `memory` (this process, LRU bounded in
bytes), `redis` (the `--redis-url` every replica shares) or a `redis://` URL of its own.
See `response_cache` for what is cached and how a hit is replayed.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from oai_server.cache.backend import CacheBackend
from oai_server.cache.endpoints import ChatEndpoint, CompletionsEndpoint
from oai_server.cache.memory import MemoryBackend
from oai_server.cache.metrics import CacheMetrics
from oai_server.cache.redis_backend import RedisBackend
from oai_server.cache.response_cache import ResponseCache
from oai_server.cache.service import CachedService
from oai_server.services.chat import ChatService
from oai_server.services.completions import CompletionService
from oai_server.settings import Settings

__all__ = ["CachedService", "ResponseCache", "build_cache"]


def build_cache(
    settings: Settings,
    registry: CollectorRegistry,
    chat: ChatService,
    completions: CompletionService,
) -> ResponseCache | None:
    """The cache `settings` ask for, its metrics on `registry`; None when it is off."""
    if settings.response_cache == "off":
        return None
    metrics = CacheMetrics(registry)
    backend: CacheBackend
    redis_url = settings.response_cache_redis
    if redis_url is None:
        backend = MemoryBackend(
            settings.response_cache_max_bytes, settings.response_cache_ttl, metrics
        )
    else:
        backend = RedisBackend(redis_url, settings.response_cache_ttl, metrics)
    return ResponseCache(
        backend,
        metrics,
        ChatEndpoint(chat),
        CompletionsEndpoint(completions),
        shared=settings.response_cache_shared,
    )
