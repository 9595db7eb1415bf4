"""A Prometheus histogram fed a whole request's observations at once.

`prometheus_client.Histogram.observe` takes a lock and walks the buckets for each value:
about a microsecond, which per streamed token was a tenth of the server's own cost. Inter-token
latencies are counted per request into a `Tally` (one `bisect` and one add per token) and
added to the histogram when the request ends, as vLLM records its per-step stats in batches.
Every update and every scrape runs on the event loop's thread, so no lock is needed.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence

from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry


class Tally:
    """One request's observations, per bucket."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.total = 0.0

    def observe(self, value: float) -> None:
        # `le` buckets: the first bound at or above the value.
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value


class BatchedHistogram(Collector):
    """A histogram without labels whose observations arrive as `Tally`s."""

    def __init__(
        self, name: str, documentation: str, buckets: Sequence[float], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.bounds = (*sorted(float(b) for b in buckets), math.inf)
        self._counts = [0] * len(self.bounds)
        self._sum = 0.0
        registry.register(self)

    def tally(self) -> Tally:
        return Tally(self.bounds)

    def add(self, tally: Tally) -> None:
        """Count every observation of `tally`."""
        counts = self._counts
        for i, n in enumerate(tally.counts):
            if n:
                counts[i] += n
        self._sum += tally.total

    def observe(self, value: float) -> None:
        one = self.tally()
        one.observe(value)
        self.add(one)

    def collect(self) -> Iterator[Metric]:
        cumulative, buckets = 0, []
        for bound, n in zip(self.bounds, self._counts, strict=True):
            cumulative += n
            buckets.append(("+Inf" if bound == math.inf else repr(bound), float(cumulative)))
        yield HistogramMetricFamily(
            self.name, self.documentation, buckets=buckets, sum_value=self._sum
        )

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation)
