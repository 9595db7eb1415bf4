"""`GET /v1/models` and `GET /v1/models/{model}`.

A request that carries `anthropic-version` (what Anthropic's clients send) gets the list
in Anthropic's shape, which those clients read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from fastapi import APIRouter, Request, Response

from oai_server.http.answer import json_response
from oai_server.models import ServedModel
from oai_server.state import ServerState
from schemas import anthropic
from schemas.common import ListModelsResponse, Model

# The header every Anthropic client sends: it asks for Anthropic's shapes.
ANTHROPIC_VERSION = "anthropic-version"


def _model(server: ServerState, served: ServedModel) -> Model:
    modalities: list[Literal["text", "image"]] | None = None
    tasks: list[Literal["generate", "embed", "classify", "score"]]
    if served.kind == "embedding":
        embedder = server.embedder
        max_model_len = None if embedder is None else embedder.model_info.max_model_len
        # An embedding model scores by the cosine of two vectors; a cross-encoder by its
        # classifier's head.
        pooled = "embed" if embedder is None else embedder.model_info.task
        tasks = [pooled, "score"]
    else:
        engine = server.engine.serving(served.engine_model)
        max_model_len = engine.model_info.max_model_len
        modalities = ["text", "image"] if engine.model_info.image_limit else ["text"]
        tasks = ["generate"]
    return Model(
        id=served.name,
        created=server.created,
        owned_by="oai-server",
        root=served.root,
        parent=served.parent,
        max_model_len=max_model_len,
        input_modalities=modalities,
        supported_tasks=tasks,
    )


def _anthropic_model(server: ServerState, served: ServedModel) -> anthropic.ModelInfo:
    created = datetime.fromtimestamp(server.created, UTC).isoformat().replace("+00:00", "Z")
    return anthropic.ModelInfo(id=served.name, display_name=served.name, created_at=created)


def _anthropic_list(server: ServerState) -> anthropic.ModelList:
    data = [_anthropic_model(server, served) for served in server.models]
    return anthropic.ModelList(
        data=data,
        has_more=False,
        first_id=data[0].id if data else None,
        last_id=data[-1].id if data else None,
    )


def router(server: ServerState) -> APIRouter:
    """The routes, listing `server`'s models: their names, engines, and when it started."""
    router = APIRouter()

    @router.get("/v1/models")
    async def list_models(request: Request) -> Response:
        if ANTHROPIC_VERSION in request.headers:
            return json_response(_anthropic_list(server))
        return json_response(
            ListModelsResponse(data=[_model(server, served) for served in server.models])
        )

    @router.get("/v1/models/{model:path}")
    async def retrieve_model(model: str, request: Request) -> Response:
        served = server.models.get(model)
        if ANTHROPIC_VERSION in request.headers:
            return json_response(_anthropic_model(server, served))
        return json_response(_model(server, served))

    return router
