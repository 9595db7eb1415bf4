"""Mirror a replica's Prometheus registry into Ray's metrics, so the cluster sees them all.

Each replica keeps its own registry (what its `/metrics` shows). Ray aggregates the
metrics of every process on every node and exports them from each node's metrics agent
(Prometheus scrapes those, or Ray's dashboard shows them), prefixed `ray_` and tagged
with the Serve application, deployment and replica. Counters and histograms are mirrored
as gauges holding their running totals (`rate()` works on them as on counters).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CollectorRegistry
from ray.serve import metrics as serve_metrics

from oai_server.features import Feature
from oai_server.state import ServerState

logger = logging.getLogger(__name__)

INTERVAL_S = 2.0


class RayMetricsMirror:
    """Copies every sample of `registry` into a Ray gauge of the same name."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._gauges: dict[str, serve_metrics.Gauge] = {}
        self._task: asyncio.Task[None] | None = None

    def copy_once(self) -> None:
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue  # creation timestamps mean nothing summed across replicas
                gauge = self._gauges.get(sample.name)
                if gauge is None:
                    gauge = serve_metrics.Gauge(
                        sample.name,
                        description=family.documentation,
                        tag_keys=tuple(sorted(sample.labels)),  # type: ignore[arg-type]
                    )
                    self._gauges[sample.name] = gauge
                gauge.set(sample.value, tags=dict(sample.labels))

    async def run(self) -> None:
        """Copy every `INTERVAL_S` until cancelled."""
        while True:
            try:
                self.copy_once()
            except Exception:  # metrics must never take the replica down
                logger.exception("copying metrics to Ray failed")
            await asyncio.sleep(INTERVAL_S)

    async def start(self) -> None:
        self._task = asyncio.create_task(self.run())

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def feature(core: ServerState) -> Feature[None]:
    """The app's metrics, mirrored into Ray's while the app runs (`create_app(extra=...)`)."""
    mirror = RayMetricsMirror(core.metrics.registry)
    return Feature(None, start=mirror.start, stop=mirror.stop)
