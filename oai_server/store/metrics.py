"""The store's Prometheus metrics, registered in the app's own registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class StoreMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.written = Counter(
            "oai_store_writes", "Objects written to the store.", registry=registry
        )
        self.write_errors = Counter(
            "oai_store_write_errors",
            "Failed attempts to write a batch to the store (it is retried).",
            registry=registry,
        )
        self.read_errors = Counter(
            "oai_store_read_errors",
            "Store reads that failed (the client got a 503).",
            registry=registry,
        )
        self.dropped = Counter(
            "oai_store_dropped",
            "Objects never stored: the write queue was full, or the server stopped first.",
            ["reason"],
            registry=registry,
        )
        self.incomplete = Counter(
            "oai_store_incomplete",
            "Answers asked to be stored but not finished (client left, or generation failed).",
            registry=registry,
        )
        self.expired = Counter(
            "oai_store_expired",
            "Objects deleted by the retention period.",
            registry=registry,
        )
        self.healthy = Gauge(
            "oai_store_healthy", "1 while the store answers, 0 while degraded.", registry=registry
        )
        self.healthy.set(1)
        self.queue_depth = Gauge(
            "oai_store_queue_depth", "Objects waiting to be written.", registry=registry
        )
