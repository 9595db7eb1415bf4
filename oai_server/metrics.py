"""Prometheus metrics of one app, in a registry of its own (no process globals)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["CONTENT_TYPE", "Metrics"]


class Metrics:
    """Request counts and latencies, plus the engine's running requests."""

    def __init__(self, running_requests: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "oai_requests",
            "HTTP requests answered, by route and status.",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "oai_request_duration_seconds",
            "Time from request to the end of the response, by route.",
            ["route"],
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        running = Gauge(
            "oai_engine_running_requests",
            "Requests the engine is working on now.",
            registry=self.registry,
        )
        running.set_function(lambda: float(running_requests()))

    def render(self) -> bytes:
        return generate_latest(self.registry)
