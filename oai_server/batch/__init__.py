"""The Batch API: `/v1/files` and `/v1/batches`, run on the idle engine, kept in the store.

Layout: `records` (files, batches and finished lines on the store's database),
`endpoints` (each endpoint a batch may name, answering through its live route's service),
`lines` (an input file read into requests; one request answered as an output line),
`runner` (claims, runs and finishes batches; one replica per batch), `hand_back` (its
lines on the chat engine, handed back as interactive requests come), `routes`, `metrics`.
`feature` wires it into the app after the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from opentelemetry.trace import Tracer

from oai_server.batch.endpoints import ChatEndpoint, Endpoint, ResponsesEndpoint, ServiceEndpoint
from oai_server.batch.hand_back import BatchLines
from oai_server.batch.lines import Shape, Shaped
from oai_server.batch.metrics import BatchMetrics
from oai_server.batch.records import BatchRecords
from oai_server.batch.routes import routes
from oai_server.batch.runner import BatchRunner
from oai_server.batch.traces import LineTraces
from oai_server.embeddings.service import EmbeddingService
from oai_server.features import Feature
from oai_server.state import ServerState
from oai_server.store.service import StoreService
from schemas.completions import CreateCompletionRequest
from schemas.embeddings import CreateEmbeddingRequest

__all__ = ["BatchLines", "BatchRunner", "feature"]


def feature(
    core: ServerState,
    lines: BatchLines,
    store: StoreService,
    embeddings: EmbeddingService | None,
    tracer: Tracer | None = None,
    more: Mapping[str, Endpoint] | None = None,
) -> Feature[BatchRunner | None]:
    """The Files and Batch routes and this replica's runner, on the store's SQL database
    (None when the store has none); `lines`: its lines on the chat engine, which the core's
    admission step hands back (built before the core); `embeddings` answers
    `/v1/embeddings` lines; `tracer` (tracing on) gives each line a trace linked to the
    request that created its batch; `more`: endpoints not the core's (rerank's and
    score's); a feature above this one adds its own to the runner
    (`BatchRunner.add_endpoint`: Anthropic's `/v1/messages`)."""
    database = store.database
    if database is None:
        return Feature(None)
    settings = core.settings
    endpoints: dict[str, Endpoint] = {
        "/v1/chat/completions": ChatEndpoint(core.chat),
        "/v1/completions": ServiceEndpoint(CreateCompletionRequest, core.completions),
        "/v1/responses": ResponsesEndpoint(core.chat, store, core.secret),
    }
    if embeddings is not None:
        # On the embedding model's own engine: its lines never share a step with the chat,
        # so an interactive chat request neither hands them back nor is hidden by them.
        endpoints["/v1/embeddings"] = ServiceEndpoint(
            CreateEmbeddingRequest, embeddings, shares_chat_engine=False
        )
    endpoints.update(more or {})
    records = BatchRecords(database)
    traces = LineTraces(tracer)

    def shape(owner: str) -> Shape:
        """As the live routes shape a body of `owner` ("": no keys): salted, tiered."""
        principal = owner or None

        def shaped(req: Shaped) -> Shaped:
            return core.for_caller(req, principal)

        return shaped

    runner = BatchRunner(
        records,
        endpoints,
        BatchMetrics(core.metrics.registry),
        shape=shape,
        waiting=core.engine.waiting_requests,
        live=core.engine.live_requests,
        health=core.engine.check_health,
        breaker=store.breaker,
        lines=lines,
        max_in_flight_idle=max(settings.batch_max_in_flight_idle, settings.batch_max_in_flight),
        idle_s=settings.batch_idle_seconds,
        lease_s=settings.batch_lease_seconds,
        priority=settings.scheduling_policy == "priority",
        traces=traces,
    )
    router = routes(
        store, records, runner.endpoints, settings.files_max_bytes, runner.wake, traces.created
    )
    task: list[asyncio.Task[None]] = []

    async def start() -> None:
        task.append(asyncio.create_task(runner.run()))

    async def stop() -> None:
        for running in task:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
        await runner.stop()

    return Feature(runner, router.routes, start=start, stop=stop)
