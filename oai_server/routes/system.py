"""`GET /health`, `GET /version`, `GET /metrics`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from oai_server import __version__
from oai_server.observability.metrics import CONTENT_TYPE
from oai_server.state import server_state

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> Response:
    """200 when every engine (chat, embeddings) can serve; 503 (OpenAI error body) while
    loading or once dead.

    `store` says whether stored completions can be written and read ("ok") or not
    ("degraded"): answers do not depend on it, so a degraded store never makes this a 503.
    """
    server = server_state(request)
    await server.engine.check_health()
    if server.embedder is not None:
        await server.embedder.check_health()
    body = {"status": "ok"}
    if server.store is not None:
        body["store"] = server.store.health.status
    return JSONResponse(body)


@router.get("/version")
async def version() -> Response:
    return JSONResponse({"version": __version__})


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    return Response(server_state(request).metrics.render(), media_type=CONTENT_TYPE)
