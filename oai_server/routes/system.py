"""`GET /health`, `GET /version`, `GET /metrics`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from oai_server import __version__
from oai_server.observability.metrics import CONTENT_TYPE
from oai_server.state import server_state

# What a feature adds to `/health`'s body (`{"store": "ok"}`), read on each probe.
HealthReport = Callable[[], Mapping[str, object]]


def router(reports: Sequence[HealthReport] = ()) -> APIRouter:
    """The routes; `/health` adds each of `reports` (the features') to its body."""
    router = APIRouter()
    router.add_api_route("/health", _health(reports), methods=["GET"])
    router.add_api_route("/version", version, methods=["GET"])
    router.add_api_route("/metrics", metrics, methods=["GET"])
    return router


def _health(reports: Sequence[HealthReport]) -> Callable[[Request], Awaitable[Response]]:
    async def health(request: Request) -> Response:
        """200 when every engine (chat, embeddings) can serve; 503 (OpenAI error body) while
        loading or once dead.

        `store` says whether stored completions are written and read in time ("ok") or not
        ("degraded": the database fails or hangs, or queued writes wait). `dependencies` names
        each service the server uses (Redis, the database) as "ok" or "down" (marked down by
        its breaker: not waited on until a probe answers). Answers do not depend on them, so
        neither ever makes this a 503.
        """
        server = server_state(request)
        await server.engine.check_health()
        if server.embedder is not None:
            await server.embedder.check_health()
        body: dict[str, object] = {"status": "ok"}
        for report in reports:
            body.update(report())
        body["dependencies"] = server.dependencies.status()
        return JSONResponse(body)

    return health


async def version() -> Response:
    return JSONResponse({"version": __version__})


async def metrics(request: Request) -> Response:
    return Response(server_state(request).metrics.render(), media_type=CONTENT_TYPE)
