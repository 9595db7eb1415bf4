"""The tracer provider: spans batched to an OTLP exporter, configured as OpenTelemetry's
SDK configures itself.

`--otlp-traces-endpoint` is the endpoint (as under `vllm serve`); the rest is the standard
`OTEL_*` environment, read by the SDK and the exporters themselves:
`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` (or `OTEL_EXPORTER_OTLP_PROTOCOL`): `grpc` (the
default, as vLLM's) or `http/protobuf`; `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (or
`..._HEADERS`), `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`
and its argument, the batch processor's `OTEL_BSP_*`. Each app has a provider of its own
(none is made global), so two apps in one process never share one.
"""

from __future__ import annotations

import os

from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    OTEL_RESOURCE_ATTRIBUTES,
    OTEL_SERVICE_NAME,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from oai_server import __version__

PROTOCOLS = ("grpc", "http/protobuf")
DEFAULT_SERVICE_NAME = "oai-server"


def protocol() -> str:
    """The OTLP protocol the environment asks for (`grpc` unless told)."""
    return (
        os.environ.get(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
        or os.environ.get(OTEL_EXPORTER_OTLP_PROTOCOL)
        or "grpc"
    ).strip()


def exporter(endpoint: str) -> SpanExporter:
    """An OTLP span exporter to `endpoint` over the environment's protocol."""
    chosen = protocol()
    if chosen == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint)
    if chosen == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HTTPSpanExporter,
        )

        return HTTPSpanExporter(endpoint=endpoint)
    raise ValueError(
        f"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL={chosen!r}: use one of {', '.join(PROTOCOLS)}."
    )


def tracer_provider(endpoint: str) -> TracerProvider:
    """A provider exporting to `endpoint`; service name `oai-server` unless the
    environment names one; the sampler the environment asks for (every trace by default,
    a client's sampled flag respected)."""
    attributes = {"service.version": __version__}
    named = os.environ.get(OTEL_SERVICE_NAME) or "service.name=" in os.environ.get(
        OTEL_RESOURCE_ATTRIBUTES, ""
    )
    if not named:
        attributes[SERVICE_NAME] = DEFAULT_SERVICE_NAME
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter(endpoint)))
    return provider
