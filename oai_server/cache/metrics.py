"""The cache's Prometheus metrics (`oai_cache_*`), on the app's own registry."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge


class CacheMetrics:
    """Hits, misses, coalesced requests, evictions, bytes held and backend errors.

    Every cacheable request counts once: a hit (answered from a stored entry), a
    coalesced request (answered from an identical request in flight) or a miss
    (answered by the engine).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.hits = Counter(
            "oai_cache_hits", "Requests answered from a stored entry.", registry=registry
        )
        self.misses = Counter(
            "oai_cache_misses", "Cacheable requests answered by the engine.", registry=registry
        )
        self.coalesced = Counter(
            "oai_cache_coalesced",
            "Requests answered from an identical request that was in flight.",
            registry=registry,
        )
        self.evictions = Counter(
            "oai_cache_evictions",
            "Entries dropped from the memory cache to stay within its byte bound.",
            registry=registry,
        )
        self.backend_errors = Counter(
            "oai_cache_backend_errors",
            "Cache reads or writes that failed (store down or slow, entry undecodable).",
            registry=registry,
        )
        self._bytes = Gauge(
            "oai_cache_bytes", "Bytes of entries held in this process.", registry=registry
        )

    def track_bytes(self, bytes_held: Callable[[], int]) -> None:
        """Report `bytes_held()` as the bytes gauge on every scrape."""
        self._bytes.set_function(lambda: float(bytes_held()))
