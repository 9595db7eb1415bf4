"""Prometheus metrics of one app, in a registry of its own (no process globals).

Names follow Prometheus conventions (`_seconds`, `_total` added to counters). Series of
requests and of the engine carry a `model` label: the served name a request resolved to
(an adapter's when it named one; empty for a request refused before that). The
engine's own metrics (vLLM's `vllm:*`, which vLLM keeps in the process-wide default
registry) are appended to the same page, so dashboards built for `vllm serve` work.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from oai_server.observability.histogram import BatchedHistogram
from oai_server.observability.usage import UsageMeter

__all__ = ["CONTENT_TYPE", "WAITING_REQUESTS", "Metrics"]

# The gauge an autoscaler scales on (the Helm chart's HPA names it).
WAITING_REQUESTS = "oai_engine_waiting_requests"

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_TOKEN_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5)


class Metrics:
    """HTTP requests, engine requests and tokens, usage per key, rate-limit rejections."""

    def __init__(
        self, running_requests: Callable[[], int], waiting_requests: Callable[[], int]
    ) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter(
            "oai_requests",
            "HTTP requests answered, by the route that matched, method, status and model.",
            ["route", "method", "status", "model"],
            registry=r,
        )
        self.latency = BatchedHistogram(
            "oai_request_duration_seconds",
            "Time from request to the end of the response, by route and model.",
            _LATENCY_BUCKETS,
            r,
            ["route", "model"],
        )
        self.time_to_first_token = BatchedHistogram(
            "oai_time_to_first_token_seconds",
            "Time from submitting a request to the engine to its first output.",
            _LATENCY_BUCKETS,
            r,
            ["model"],
        )
        # Observed per token: fed a request's observations at its end (see histogram.py).
        # Every histogram here is one of ours: an observation costs a bisect, not a lock
        # and a walk of the buckets.
        self.inter_token_latency = BatchedHistogram(
            "oai_inter_token_latency_seconds",
            "Time between successive output tokens of a request.",
            _TOKEN_BUCKETS,
            r,
            ["model"],
        )
        self.e2e_latency = BatchedHistogram(
            "oai_e2e_request_latency_seconds",
            "Time from submitting a request to the engine to its end.",
            _LATENCY_BUCKETS,
            r,
            ["model"],
        )
        self.queue_time = BatchedHistogram(
            "oai_request_queue_time_seconds",
            "Time a request waited in the engine's queue before it was scheduled.",
            _LATENCY_BUCKETS,
            r,
            ["model"],
        )
        self.prompt_tokens = Counter(
            "oai_prompt_tokens", "Prompt tokens processed.", ["model"], registry=r
        )
        self.generation_tokens = Counter(
            "oai_generation_tokens", "Tokens generated.", ["model"], registry=r
        )
        self.finished = Counter(
            "oai_request_finished",
            "Engine requests (choices) finished, by finish reason and model.",
            ["finish_reason", "model"],
            registry=r,
        )
        self.rate_limited = Counter(
            "oai_rate_limit_rejections",
            "Requests refused with 429, by the limit hit (requests or tokens).",
            ["limit"],
            registry=r,
        )
        # Embeddings, by the embedding model that computed them.
        self.embedding_inputs = Counter(
            "oai_embedding_inputs", "Inputs embedded.", ["model"], registry=r
        )
        self.embedding_tokens = Counter(
            "oai_embedding_tokens", "Tokens of the inputs embedded.", ["model"], registry=r
        )
        self.score_pairs = Counter(
            "oai_score_pairs",
            "Pairs scored by rerank and score, texts by classify.",
            ["model"],
            registry=r,
        )
        # Tokens by API key id, model and tier: totals kept by the meter, rendered on scrape.
        self.usage = UsageMeter()
        r.register(self.usage)
        running = Gauge(
            "oai_engine_running_requests",
            "Requests the engine holds now (waiting or running).",
            registry=r,
        )
        running.set_function(lambda: float(running_requests()))
        waiting = Gauge(
            WAITING_REQUESTS,
            "Requests submitted to the engine that have no output yet (queued or in prefill).",
            registry=r,
        )
        waiting.set_function(lambda: float(waiting_requests()))

    def render(self) -> bytes:
        return generate_latest(self.registry) + generate_latest(REGISTRY)
