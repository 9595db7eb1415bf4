"""`GET /v1/models` and `GET /v1/models/{model}`.

A feature may bring its own shape of the list (`ModelListShape`), which its clients read:
a request that carries the feature's header (Anthropic's `anthropic-version`) gets it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Literal

from fastapi import APIRouter, Request, Response

from oai_server.http.answer import json_response
from oai_server.models import ServedModel
from oai_server.state import ServerState
from schemas.common import ListModelsResponse, Model, ResponseModel


class ModelListShape(ABC):
    """A feature's own shape of `/v1/models`, for the requests that carry `header`."""

    header: str

    @abstractmethod
    def model(self, served: ServedModel, created: int) -> ResponseModel:
        """One model (`created`: when the server started, in Unix seconds)."""

    @abstractmethod
    def listing(self, served: Iterable[ServedModel], created: int) -> ResponseModel:
        """The list of the models `served`."""


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


def router(server: ServerState, shapes: Sequence[ModelListShape] = ()) -> APIRouter:
    """The routes, listing `server`'s models (their names, engines, and when it started),
    in a feature's own shape (`shapes`) for a request that carries that feature's header,
    else in OpenAI's."""
    router = APIRouter()

    def shape_of(request: Request) -> ModelListShape | None:
        return next((shape for shape in shapes if shape.header in request.headers), None)

    @router.get("/v1/models")
    async def list_models(request: Request) -> Response:
        shape = shape_of(request)
        if shape is not None:
            return json_response(shape.listing(server.models, server.created))
        return json_response(
            ListModelsResponse(data=[_model(server, served) for served in server.models])
        )

    @router.get("/v1/models/{model:path}")
    async def retrieve_model(model: str, request: Request) -> Response:
        served = server.models.get(model)
        shape = shape_of(request)
        if shape is not None:
            return json_response(shape.model(served, server.created))
        return json_response(_model(server, served))

    return router
