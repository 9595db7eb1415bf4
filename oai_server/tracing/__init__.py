"""OpenTelemetry traces: one span per request, continued from the client's, exported over
OTLP (`--otlp-traces-endpoint`, as `vllm serve` names it).

`feature` builds the app's tracer provider and the middleware that opens each request's
server span; the code a request waits on opens its child spans through
`oai_server.observability.spans`, which costs a context-variable read when tracing is off.
The tracer it offers is what work started apart from a request (batch lines, background
responses) opens its own trace with, linked to the request that started it.
"""

from __future__ import annotations

import asyncio

from opentelemetry.trace import Tracer
from starlette.middleware import Middleware

from oai_server.features import Feature
from oai_server.settings import Settings
from oai_server.tracing.middleware import TracingMiddleware
from oai_server.tracing.provider import tracer_provider

__all__ = ["TracingMiddleware", "feature"]


def feature(settings: Settings) -> Feature[Tracer | None]:
    """The tracer `--otlp-traces-endpoint` asks for (None: tracing off) and the middleware
    of each request's span; the spans still batched are exported at shutdown."""
    if settings.otlp_traces_endpoint is None:
        return Feature(None)
    provider = tracer_provider(settings.otlp_traces_endpoint)
    tracer = provider.get_tracer("oai_server")

    async def stop() -> None:
        # Blocks while the last batch is exported (up to the exporter's timeout).
        await asyncio.to_thread(provider.shutdown)

    return Feature(
        tracer,
        middleware=[
            Middleware(TracingMiddleware, tracer=tracer, log_text=settings.log_request_text)
        ],
        stop=stop,
    )
