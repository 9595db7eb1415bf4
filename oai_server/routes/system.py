"""`GET /health`, `GET /version`, `GET /metrics`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from oai_server import __version__
from oai_server.observability.metrics import CONTENT_TYPE, Metrics
from oai_server.resilience import Dependencies

# What a feature adds to `/health`'s body (`{"store": "ok"}`), read on each probe.
HealthReport = Callable[[], Mapping[str, object]]
# An engine's health check: raises while it cannot serve (loading, dead).
HealthCheck = Callable[[], Awaitable[None]]


def router(
    engines: Sequence[HealthCheck],
    dependencies: Dependencies,
    metrics: Metrics,
    reports: Sequence[HealthReport] = (),
) -> APIRouter:
    """The routes; `/health` checks each of `engines` (chat, embeddings), adds each of
    `reports` (the features') to its body, and the `dependencies`' status; `/metrics`
    renders `metrics`."""
    router = APIRouter()
    router.add_api_route("/health", _health(engines, dependencies, reports), methods=["GET"])
    router.add_api_route("/version", version, methods=["GET"])

    async def render_metrics() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    router.add_api_route("/metrics", render_metrics, methods=["GET"])
    return router


def _health(
    engines: Sequence[HealthCheck], dependencies: Dependencies, reports: Sequence[HealthReport]
) -> Callable[[], Awaitable[Response]]:
    async def health() -> Response:
        """200 when every engine (chat, embeddings) can serve; 503 (OpenAI error body) while
        loading or once dead.

        `store` says whether stored completions are written and read in time ("ok") or not
        ("degraded": the database fails or hangs, or queued writes wait). `dependencies` names
        each service the server uses (Redis, the database) as "ok" or "down" (marked down by
        its breaker: not waited on until a probe answers). Answers do not depend on them, so
        neither ever makes this a 503.
        """
        for check in engines:
            await check()
        body: dict[str, object] = {"status": "ok"}
        for report in reports:
            body.update(report())
        body["dependencies"] = dependencies.status()
        return JSONResponse(body)

    return health


async def version() -> Response:
    return JSONResponse({"version": __version__})
