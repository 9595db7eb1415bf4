"""Each batch line's trace, linked to the request that created its batch.

A line runs long after that request ended (its batch is claimed by a runner, maybe after
a restart), so it gets a trace of its own whose root span links to the creating
request's span. The link is kept in this process: a batch created on another replica, or
before a restart, still names its `oai.batch.id` on every line's span and on the
creating request's, by which a backend finds one from the other.
"""

from __future__ import annotations

import contextlib

from opentelemetry import trace
from opentelemetry.trace import SpanContext, Tracer

from oai_server.observability.spans import current_origin, new_trace


class LineTraces:
    """The tracer of batch lines (None: tracing off) and the creating requests' spans."""

    def __init__(self, tracer: Tracer | None) -> None:
        self.tracer = tracer
        self._origins: dict[str, SpanContext] = {}

    def created(self, batch_id: str) -> None:
        """Batch `batch_id` was created by the current request: its lines link to it."""
        origin = current_origin()
        if origin is not None:
            trace.get_current_span().set_attribute("oai.batch.id", batch_id)
            self._origins[batch_id] = origin

    def line(self, batch_id: str, custom_id: str) -> contextlib.AbstractContextManager[None]:
        """The trace of one line of `batch_id` while it is answered."""
        attributes = {"oai.batch.id": batch_id, "oai.batch.custom_id": custom_id}
        return new_trace(self.tracer, "batch line", self._origins.get(batch_id), attributes)

    def finished(self, batch_id: str) -> None:
        self._origins.pop(batch_id, None)
