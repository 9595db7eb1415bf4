"""The Batch API's Prometheus metrics, registered in the app's own registry."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter


class BatchMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.batches = Counter(
            "oai_batches",
            "Batches this replica ended, by final status.",
            ["status"],
            registry=registry,
        )
        self.lines = Counter(
            "oai_batch_lines",
            "Batch lines answered, by result (completed or failed).",
            ["result"],
            registry=registry,
        )
        self.tokens = Counter(
            "oai_batch_tokens",
            "Tokens of the batch lines answered, by kind.",
            ["kind"],
            registry=registry,
        )

    def line(self, failed: bool, line: dict[str, Any]) -> None:
        self.lines.labels("failed" if failed else "completed").inc()
        usage = ((line.get("response") or {}).get("body") or {}).get("usage") or {}
        for kind in ("prompt_tokens", "completion_tokens"):
            self.tokens.labels(kind.removesuffix("_tokens")).inc(usage.get(kind, 0))

    def finished(self, status: str) -> None:
        self.batches.labels(status).inc()
